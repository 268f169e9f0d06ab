"""The search index across sessions: written when a head's timeline is built, dropped on delete."""

import pytest

from tests.helpers import ORPHANED_CALL, sample
from transcripts import actions, search, timeline

pytestmark = pytest.mark.django_db


def test_a_built_timeline_indexes_the_heads_records(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    assert search.search(ORPHANED_CALL) == []
    timeline.timeline_for(session, "synthesize")
    [hit] = search.search(ORPHANED_CALL)
    assert (hit.session_id, hit.record) == (session.pk, 8)
    # Another policy's timeline of the same head adds nothing twice.
    timeline.timeline_for(session, "discard")
    assert len(search.search(ORPHANED_CALL)) == 1


def test_every_word_must_match_and_query_syntax_is_taken_literally(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    timeline.timeline_for(session, "synthesize")
    assert {h.record for h in search.search("integration suite")} == {7, 8}
    assert search.search("integration nowhere") == []
    assert search.search('" OR * NEAR(') == []


def test_a_deleted_session_leaves_the_index(alice, workspace, ingest):
    session = ingest(workspace, "mine.jsonl", sample("formats/claude_code.jsonl"))
    timeline.timeline_for(session, "synthesize")
    assert [h.session_id for h in search.search(ORPHANED_CALL)] == [session.pk]
    actions.do_delete_sessions([session], acting_user=alice)
    assert search.search(ORPHANED_CALL) == []
