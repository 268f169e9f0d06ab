"""do_ingest_session, which the upload view and the ingest and demo commands share."""

import pytest

from tests.helpers import sample
from transcripts.models import Session

pytestmark = pytest.mark.django_db


def test_it_shortens_a_name_too_long_for_the_database_and_keeps_the_extension(workspace, ingest):
    data = sample("formats/claude_code.jsonl")
    name = "a" * 294 + ".jsonl"
    assert len(name) == 300

    ingest(workspace, name, data)

    session = Session.objects.get()
    assert session.name == "a" * 248 + "…" + ".jsonl"
    assert len(session.name) == 255
    assert session.format == "claude_code"
    assert session.fault_counts == {"missing_result": 1}
    assert session.head.read() == data


def test_it_cuts_a_long_name_without_an_extension_at_the_limit(workspace, ingest):
    ingest(workspace, "b" * 300, b"not json\n")
    session = Session.objects.get()
    assert session.name == "b" * 254 + "…"
    assert session.error.startswith(session.name + ": ")


def test_it_keeps_a_name_that_fits(workspace, ingest):
    name = "c" * 249 + ".jsonl"
    ingest(workspace, name, sample("formats/claude_code.jsonl"))
    assert Session.objects.get().name == name
