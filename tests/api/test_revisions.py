import pytest

from tests.api.conftest import error_of
from tests.helpers import run_inline, sample
from transcripts import actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def repaired(alice, workspace, ingest):
    """Return a session repaired once: revisions 0 (the upload) and 1."""
    session = ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    run_inline(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))
    session.refresh_from_db()
    return session


def test_it_lists_revisions_oldest_first(api, repaired):
    body = api.get(f"/api/sessions/{repaired.pk}/revisions").json()
    raw, fixed = repaired.revisions.order_by("number")
    assert [(r["number"], r["parent"], r["policy"]) for r in body["results"]] == [
        (0, None, ""),
        (1, 0, "synthesize"),
    ]
    assert [(r["sha256"], r["size"]) for r in body["results"]] == [
        (raw.sha256, raw.size),
        (fixed.sha256, fixed.size),
    ]


def test_it_sends_a_revisions_exact_bytes(api, repaired):
    url = f"/api/sessions/{repaired.pk}/revisions/%d/content"
    raw = api.get(url % 0)
    assert raw.status_code == 200
    assert raw["Content-Type"] == "application/octet-stream"
    assert raw["Content-Disposition"] == 'attachment; filename="faulty.jsonl"'
    assert raw.streaming
    raw_bytes = b"".join(raw.streaming_content)
    assert raw_bytes == sample("formats/claude_code.jsonl")
    fixed = api.get(url % 1, HTTP_ACCEPT="application/octet-stream")
    assert b"".join(fixed.streaming_content) == repaired.head.read() != raw_bytes


def test_it_answers_a_missing_revision_in_json(api, repaired):
    response = api.get(
        f"/api/sessions/{repaired.pk}/revisions/2/content", HTTP_ACCEPT="application/octet-stream"
    )
    assert error_of(response) == (404, "not_found")
    assert response["Content-Type"] == "application/json"


def test_it_refuses_to_send_bytes_as_json(api, repaired):
    response = api.get(
        f"/api/sessions/{repaired.pk}/revisions/0/content", HTTP_ACCEPT="application/json"
    )
    assert error_of(response) == (406, "not_acceptable")


def test_a_name_with_folders_is_sent_as_one_file_name(api, workspace, ingest):
    session = ingest(workspace, "proj/..\\..\\evil.jsonl", sample("formats/claude_code.jsonl"))
    response = api.get(f"/api/sessions/{session.pk}/revisions/0/content")
    b"".join(response.streaming_content)
    assert response["Content-Disposition"] == 'attachment; filename="proj_.._.._evil.jsonl"'
