"""Appended revisions store their delta only, at most Revision.MAX_CHAIN deep."""

import hashlib

import pytest
from django.core.files.storage import default_storage

from tests.helpers import run_inline
from tests.sync.conftest import call, reply, result, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Revision, blob_name

pytestmark = pytest.mark.django_db

START = user("u0", None, "go") + call("a0", "u0", "toolu_0") + result("r0", "a0", "toolu_0")


def stream(session, alice, count):
    """Append `count` user/assistant exchanges one call each; return the bytes sent."""
    sent = b""
    parent = "r0"
    for n in range(1, count + 1):
        data = user(f"u{n}", parent, f"step {n}") + reply(f"a{n}", f"u{n}")
        sync.do_append_records(session, data, acting_user=alice)
        sent += data
        parent = f"a{n}"
    return sent


def test_each_append_stores_only_what_it_adds(workspace, alice):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)

    sent = stream(session, alice, 5)

    session.refresh_from_db()
    head = session.head
    assert head.read() == START + sent
    assert head.sha256 == hashlib.sha256(START + sent).hexdigest()
    assert (head.chain, head.size) == (5, len(START + sent))
    assert not default_storage.exists(blob_name(head.sha256))  # the whole was never stored
    assert default_storage.size(blob_name(head.delta)) < len(sent)


def test_the_chain_restarts_with_a_whole_copy(workspace, alice, settings):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)

    sent = stream(session, alice, Revision.MAX_CHAIN + 3)

    session.refresh_from_db()
    chains = list(session.revisions.order_by("number").values_list("chain", flat=True))
    assert chains == [0, *range(1, Revision.MAX_CHAIN + 1), 0, 1, 2]
    full = session.revisions.get(number=Revision.MAX_CHAIN + 1)
    assert default_storage.exists(blob_name(full.sha256))
    assert session.head.read() == START + sent
    for revision in session.revisions.all():
        assert hashlib.sha256(revision.read()).hexdigest() == revision.sha256


def test_an_appended_revision_repairs_exports_and_rolls_back(workspace, alice):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)
    broken = call("a9", "r0", "toolu_9") + user("u9", "a9", "anyone?")
    sync.do_append_records(session, broken, acting_user=alice)
    session.refresh_from_db()
    appended = session.head
    assert appended.delta

    export = run_inline(
        actions.do_start_job(
            workspace, [session], kind="export", policy="synthesize", acting_user=alice
        )
    )
    assert export.items.get().status == "exported"
    repair = run_inline(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    assert repair.items.get().status == "repaired"
    rollback = run_inline(actions.do_start_rollback_job(repair, acting_user=alice))

    session.refresh_from_db()
    assert rollback.items.get().status == "rolled_back"
    assert session.head.read() == START + broken
    assert session.head.delta == appended.delta
