"""The search index across sessions: written when a head's timeline is built, dropped on delete."""

import json

import pytest
from django.db import connection

from tests.helpers import ORPHANED_CALL, run_inline, sample
from transcripts import actions, search
from transcripts.models import Job, Session

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_index() -> None:
    """Start each test from an empty index, inside its transaction.

    The index table is no model's, so the flush after a test that committed
    rows (`transactional_db`: a worker, a live server) leaves that test's
    entries behind, and the session ids they name can be given again.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {search.TABLE}")


def test_a_built_timeline_indexes_the_heads_records(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    assert search.search(ORPHANED_CALL) == []
    actions.timeline_for(session, "synthesize")
    [hit] = search.search(ORPHANED_CALL)
    assert (hit.session_id, hit.record) == (session.pk, 8)
    # Another policy's timeline of the same head adds nothing twice.
    actions.timeline_for(session, "discard")
    assert len(search.search(ORPHANED_CALL)) == 1


def test_every_word_must_match_and_query_syntax_is_taken_literally(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    actions.timeline_for(session, "synthesize")
    assert {h.record for h in search.search("integration suite")} == {7, 8}
    assert search.search("integration nowhere") == []
    assert search.search('" OR * NEAR(') == []


def test_a_deleted_session_leaves_the_index(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    actions.timeline_for(session, "synthesize")
    assert [h.session_id for h in search.search(ORPHANED_CALL)] == [session.pk]
    actions.do_delete_sessions([session], acting_user=alice)
    assert search.search(ORPHANED_CALL) == []


def _user_lines(texts: list[str]) -> bytes:
    """Return a Claude Code session of one user record per text."""
    lines = []
    parent = None
    for n, text in enumerate(texts, 1):
        uuid = f"aaaaaaaa-0000-4000-8000-{n:012d}"
        record = {"parentUuid": parent, "type": "user", "uuid": uuid, "sessionId": "s"}
        record |= {"timestamp": "2025-11-01T10:00:00.000Z"}
        record["message"] = {"role": "user", "content": text}
        lines.append(json.dumps(record))
        parent = uuid
    return ("\n".join(lines) + "\n").encode()


def test_other_workspaces_hits_neither_crowd_out_nor_show(
    alice, bob, workspace, other_workspace, ingest, alice_client, monkeypatch
):
    # Bob's records match better (short, the word repeated) and outnumber the limit.
    theirs = ingest(other_workspace, "theirs.jsonl", _user_lines(["zebra zebra"] * 12), user=bob)
    actions.timeline_for(theirs, "synthesize")
    mine = ingest(workspace, "mine.jsonl", _user_lines(["one zebra " + "filler " * 60]))
    actions.timeline_for(mine, "synthesize")
    monkeypatch.setattr(search, "MAX_HITS", 2)
    assert {h.session_id for h in search.search("zebra")} == {theirs.pk}
    scoped = search.search("zebra", Session.objects.for_user(alice))
    assert [(h.session_id, h.record) for h in scoped] == [(mine.pk, 0)]
    page = alice_client.get("/search/", {"q": "zebra"}).content.decode()
    assert "mine.jsonl" in page and "theirs.jsonl" not in page
    # A deleted session of alice's own is out of her scope too.
    actions.do_delete_sessions([mine], acting_user=alice)
    assert search.search("zebra", Session.objects.for_user(alice)) == []


def test_a_repair_replaces_the_old_heads_entries(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    actions.timeline_for(session, "synthesize")
    assert [h.record for h in search.search(ORPHANED_CALL)] == [8]
    job = actions.do_start_job(
        workspace, [session], kind=Job.Kind.REPAIR, policy="synthesize", acting_user=alice
    )
    run_inline(job)
    # The old head's records no longer answer; the new head's do once its page is built.
    assert search.search(ORPHANED_CALL) == []
    session.refresh_from_db()
    actions.timeline_for(session, "synthesize")
    hits = search.search(ORPHANED_CALL)
    assert {h.session_id for h in hits} == {session.pk}
    assert len(hits) == 2  # the call, and the result the repair wrote for it


def test_the_page_offers_to_index_the_sessions_never_opened(
    alice_client, workspace, other_workspace, bob, ingest, django_capture_on_commit_callbacks
):
    opened = ingest(workspace, "opened.jsonl", sample("formats/claude_code.jsonl"))
    never = ingest(workspace, "never.jsonl", sample("formats/claude_code.jsonl"))
    ingest(workspace, "broken.jsonl", b"{not json\n")  # nothing to index
    ingest(other_workspace, "bobs.jsonl", sample("formats/claude_code.jsonl"))  # not alice's
    alice_client.get(opened.get_absolute_url())
    page = alice_client.get("/search/").content.decode()
    assert '<span class="unindexed-count">1 session</span> is not in the search yet' in page
    assert [h.session_id for h in search.search(ORPHANED_CALL, Session.objects.filter(
        workspace=workspace))] == [opened.pk]  # fmt: skip

    # No hit says the record may be in a session not indexed yet.
    nothing = alice_client.get("/search/", {"q": "zebra"}).content.decode()
    assert "it may be in one of the 1 session not in it yet (index it above)" in nothing

    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = alice_client.post("/search/index/", {"q": "zebra"})
    # Back to the search that was being made.
    assert response.status_code == 302 and response["Location"] == "/search/?q=zebra"
    assert len(sent) == 1  # one build queued, for `never`, sent once committed
    [timeline] = never.head.timelines.all()
    actions.do_build_timeline(timeline.pk)  # what the worker runs
    hits = search.search(ORPHANED_CALL, Session.objects.filter(workspace=workspace))
    assert sorted(h.session_id for h in hits) == sorted([opened.pk, never.pk])
    assert "unindexed-count" not in alice_client.get("/search/").content.decode()


def test_indexing_takes_a_post(alice_client):
    assert alice_client.get("/search/index/").status_code == 405


CODEX_400 = (
    'unexpected status 400 Bad Request: {\n  "error": {\n    "message": "No tool output '
    'found for function call call_CCCCCCCCCCCCCCCCCCCCCC02.",\n    "type": '
    '"invalid_request_error",\n    "param": "input",\n    "code": null\n  }\n}'
)
ANTHROPIC_400 = (
    'API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":'
    '"messages.8: `tool_use` ids were found without `tool_result` blocks immediately after: '
    f"{ORPHANED_CALL}. Each `tool_use` block must have a corresponding `tool_result` block "
    'in the next message."}}'
)


def test_a_pasted_provider_error_finds_the_records_of_the_ids_it_names(
    alice, workspace, ingest, alice_client
):
    claude = ingest(workspace, "claude.jsonl", sample("formats/claude_code.jsonl"))
    codex = ingest(workspace, "codex.jsonl", sample("formats/codex_rollout.jsonl"))
    for session in (claude, codex):
        actions.timeline_for(session, "synthesize")
    # Every word of the error in one record: none; the ids it names: theirs.
    assert search.pasted_ids(CODEX_400) == ["call_CCCCCCCCCCCCCCCCCCCCCC02"]
    assert [(h.session_id, h.record) for h in search.search(CODEX_400)] == [(codex.pk, 13)]
    assert [(h.session_id, h.record) for h in search.search(ANTHROPIC_400)] == [(claude.pk, 8)]
    # An id alone is searched as the words it is; ids in words ("call_id") are no ids.
    assert search.pasted_ids(ORPHANED_CALL) == []
    assert search.pasted_ids("function_call_output for call_id x") == []
    for code in ("call_count increment", "def call_soon(self)", "fc_user_login failed"):
        assert search.pasted_ids(code) == []
    page = alice_client.get("/search/", {"q": CODEX_400}).content.decode()
    assert "1 record holds a tool call id the pasted text names: “call_CCCC" in page
    assert f"{codex.get_absolute_url()}?record=13" in page
    long = alice_client.get("/search/", {"q": " ".join(["word"] * 30)}).content.decode()
    assert "(the first 20 words of the query)" in long


def test_a_codex_400_pasted_in_a_session_shows_the_rows_of_its_call(
    alice, workspace, ingest, alice_client
):
    codex = ingest(workspace, "codex.jsonl", sample("formats/codex_rollout.jsonl"))
    actions.timeline_for(codex, "synthesize")
    page = alice_client.get(codex.get_absolute_url(), {"q": CODEX_400}).content.decode()
    assert (
        "The pasted text names the tool call id call_CCCCCCCCCCCCCCCCCCCCCC02: the rows "
        "holding it are shown."
    ) in page
    assert 'id="r-13"' in page and 'id="r-7"' not in page
