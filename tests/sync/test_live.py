from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.helpers import run_inline
from tests.sync.conftest import call, reply, result, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Session, SyncedFile

pytestmark = pytest.mark.django_db

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
ANSWER = result("u2", "a1", "toolu_1") + reply("a2", "u2")


def synced_session(source, rel: str) -> Session:
    return SyncedFile.objects.get(source=source, path=rel).session


def test_a_call_written_just_now_is_pending_until_the_grace_passes(source, root: Path, settings):
    settings.LIVE_GRACE = 60
    (root / "s.jsonl").write_bytes(START)

    sync.do_sync_source(source.pk)

    session = synced_session(source, "s.jsonl")
    assert session.fault_counts == {"pending_result": 1}
    assert session.is_live()
    assert sync.do_expire_live_sessions() == 0

    later = timezone.now() + timedelta(seconds=61)
    assert not session.is_live(later)
    assert sync.do_expire_live_sessions(later) == 1
    session.refresh_from_db()
    assert session.fault_counts == {"missing_result": 1}
    assert sync.do_expire_live_sessions(later) == 0


def test_the_result_arriving_answers_the_pending_call(source, root: Path, settings):
    settings.LIVE_GRACE = 60
    path = root / "s.jsonl"
    path.write_bytes(START)
    sync.do_sync_source(source.pk)
    with open(path, "ab") as f:
        f.write(ANSWER)

    sync.do_sync_source(source.pk)

    session = synced_session(source, "s.jsonl")
    assert session.fault_counts == {}
    assert session.is_live()


def test_a_live_session_is_skipped_by_a_repair_job(source, root: Path, alice, settings):
    settings.LIVE_GRACE = 60
    (root / "s.jsonl").write_bytes(START)
    sync.do_sync_source(source.pk)
    session = synced_session(source, "s.jsonl")

    job = actions.do_start_job(source.workspace, [session], policy="synthesize", acting_user=alice)
    assert run_inline(job).items.get().status == "pending"


def test_appending_through_the_action_follows_the_same_rules(workspace, alice, settings):
    settings.LIVE_GRACE = 60
    session = actions.do_ingest_session(workspace, "api.jsonl", START, acting_user=alice)
    assert session.fault_counts == {"missing_result": 1}  # an upload is not live

    revision = sync.do_append_records(session, user("u2", "a1", "still there?"), acting_user=alice)

    session.refresh_from_db()
    assert session.head == revision and revision.origin == "api"
    assert session.fault_counts == {"missing_result": 1}  # answered by a user turn: broken
    assert session.is_live()


@pytest.mark.parametrize(
    ("data", "code", "message"),
    [
        (b"", "empty", "api.jsonl: nothing to append"),
        (b'{"type":"user"}', "partial_line", "api.jsonl: the last line does not end in a newline"),
        (b'{"a":1}\n{oops\n', "bad_record", "api.jsonl: appended line 2: "),
        (b"[1]\n", "bad_record", "api.jsonl: appended line 1: not a JSON object"),
        # A bare \r ends no line (the loader splits at \n): two records on one line.
        (b'{"type":"user"}\r{"type":"user"}\n', "bad_record", "api.jsonl: appended line 1: "),
        (b'{"type":"user"}\r\n', None, None),  # CRLF: one record
    ],
)
def test_bad_appends_are_refused_with_a_code(workspace, alice, data, code, message):
    session = actions.do_ingest_session(workspace, "api.jsonl", START, acting_user=alice)
    if code is None:
        sync.do_append_records(session, data, acting_user=alice)
        assert session.revisions.count() == 2
        return

    with pytest.raises(sync.AppendError, match="^" + message.replace("[", r"\[")) as caught:
        sync.do_append_records(session, data, acting_user=alice)

    assert caught.value.code == code
    assert session.revisions.count() == 1


def test_a_json_document_session_takes_no_appends(workspace, alice):
    session = actions.do_ingest_session(
        workspace, "chat.json", b'[{"role":"user","content":"hi"}]', acting_user=alice
    )

    with pytest.raises(sync.AppendError) as caught:
        sync.do_append_records(session, b'{"role":"user","content":"x"}\n', acting_user=alice)

    assert caught.value.code == "not_appendable"
    assert "is one JSON document" in str(caught.value)
