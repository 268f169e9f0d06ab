import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.helpers import run_inline
from tests.sync.conftest import age, call, reply, result, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import AuditRecord, Session, SyncedFile, SyncSource

pytestmark = pytest.mark.django_db

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
ANSWER = result("u2", "a1", "toolu_1") + reply("a2", "u2")


def write(path: Path, data: bytes, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)


def session_of(source: SyncSource, rel: str) -> Session:
    return SyncedFile.objects.select_related("session__head").get(source=source, path=rel).session


def test_it_ingests_each_file_as_a_session_of_the_source(source, root):
    write(root / "s-1.jsonl", START + ANSWER)
    (root / "proj").mkdir()
    write(root / "proj" / "s-2.jsonl", START)
    write(root / "notes.txt", b"not a session\n")

    report = sync.do_sync_source(source.pk)

    assert (report.files, report.new, report.errors) == (2, 2, [])
    first = session_of(source, "s-1.jsonl")
    assert first.head.read() == START + ANSWER
    assert (first.source, first.format, first.fault_counts) == (source, "claude_code", {})
    assert first.head.origin == "sync"
    assert session_of(source, "proj/s-2.jsonl").name == "proj/s-2.jsonl"
    source.refresh_from_db()
    assert (source.file_count, source.error_count, source.last_error) == (2, 0, "")
    assert source.last_sync is not None


def test_an_unchanged_file_makes_no_revision(source, root):
    write(root / "s.jsonl", START + ANSWER)
    sync.do_sync_source(source.pk)

    report = sync.do_sync_source(source.pk)

    assert (report.unchanged, report.new, report.appended) == (1, 0, 0)
    assert session_of(source, "s.jsonl").revisions.count() == 1


def test_growth_is_read_from_the_previous_offset_as_an_append(source, root):
    path = root / "s.jsonl"
    write(path, START)
    sync.do_sync_source(source.pk)
    write(path, ANSWER, "ab")

    report = sync.do_sync_source(source.pk)

    assert report.appended == 1
    session = session_of(source, "s.jsonl")
    assert session.head.number == 1
    assert session.head.read() == START + ANSWER
    assert session.head.origin == "sync"
    audit = AuditRecord.objects.get(session=session, op="append")
    assert (audit.span_start, audit.span_end) == (len(START), len(START + ANSWER))
    assert "2 record(s) appended to s.jsonl" in audit.note
    synced = session.synced_file
    assert (synced.offset, synced.size, synced.revision) == (
        len(START + ANSWER),
        len(START + ANSWER),
        session.head,
    )


def test_a_partial_last_line_waits_for_the_next_sync(source, root, alice_client):
    path = root / "s.jsonl"
    write(path, START)
    sync.do_sync_source(source.pk)
    half = len(ANSWER) // 3
    write(path, ANSWER[:half], "ab")

    assert sync.do_sync_source(source.pk).waiting == 1
    session = session_of(source, "s.jsonl")
    assert session.revisions.count() == 1
    # The session's page says a line is waiting, and how much of it there is.
    page = alice_client.get(session.get_absolute_url()).content.decode()
    assert f"The file ends in {half}\xa0bytes of a line with no line end yet" in page

    write(path, ANSWER[half:], "ab")
    assert sync.do_sync_source(source.pk).appended == 1
    session.refresh_from_db()
    assert session.head.read() == START + ANSWER
    assert session.fault_counts == {}


def test_a_new_file_with_no_complete_line_waits(source, root):
    write(root / "s.jsonl", START[:20])

    assert sync.do_sync_source(source.pk).waiting == 1
    assert not Session.objects.exists()


def test_a_file_that_shrank_is_a_rewrite(source, root):
    path = root / "s.jsonl"
    write(path, START + ANSWER)
    sync.do_sync_source(source.pk)
    write(path, START)

    assert sync.do_sync_source(source.pk).rewritten == 1

    session = session_of(source, "s.jsonl")
    assert session.head.read() == START
    assert session.revisions.get(number=0).read() == START + ANSWER
    audit = AuditRecord.objects.get(session=session, op="rewrite")
    assert audit.note == (f"sync: s.jsonl shrank ({len(START + ANSWER)} → {len(START)} bytes)")
    assert audit.revision_from.number == 0 and audit.revision_to.number == 1


def test_a_file_changed_before_its_old_end_is_a_rewrite_even_if_it_grew(source, root):
    path = root / "s.jsonl"
    write(path, START)
    sync.do_sync_source(source.pk)
    changed = START.replace(b"list the files", b"LIST THE FILES")
    write(path, changed + ANSWER)

    assert sync.do_sync_source(source.pk).rewritten == 1
    session = session_of(source, "s.jsonl")
    assert session.head.read() == changed + ANSWER
    assert "changed before its old end" in AuditRecord.objects.get(op="rewrite").note


def test_a_byte_changed_in_the_middle_and_lines_appended_is_a_rewrite(source, root):
    # Past the fingerprinted ends: only a hash of the whole synced prefix sees the change.
    padding = b"".join(user(f"p{n}", f"p{n - 1}" if n else None, "x" * 900) for n in range(20))
    path = root / "s.jsonl"
    write(path, padding + START)
    sync.do_sync_source(source.pk)
    middle = len(padding) // 2
    edited = bytearray(padding + START)
    at = edited.index(b"x" * 6, middle)
    edited[at : at + 6] = b"EDITED"
    write(path, bytes(edited) + ANSWER)

    report = sync.do_sync_source(source.pk)

    assert (report.appended, report.rewritten) == (0, 1)
    session = session_of(source, "s.jsonl")
    assert session.head.read() == bytes(edited) + ANSWER == path.read_bytes()


def test_a_repair_made_without_write_back_outlives_every_later_append(source, root, alice):
    # An orphaned call mid-session, repaired in Pairfix; the file keeps growing as it was.
    broken = user("u1", None, "hi") + call("a1", "u1", "toolu_1") + user("u2", "a1", "go on")
    path = root / "s.jsonl"
    write(path, broken)
    age(path)
    sync.do_sync_source(source.pk)
    session = session_of(source, "s.jsonl")
    assert session.fault_counts == {"missing_result": 1}
    run_inline(
        actions.do_start_job(session.workspace, [session], policy="synthesize", acting_user=alice)
    )
    session.refresh_from_db()
    repaired = session.head.read()
    assert session.fault_counts == {}
    for n in (1, 2, 3):
        write(path, reply(f"r{n}", "u2"), "ab")
        age(path)
        report = sync.do_sync_source(source.pk)
        assert (n, report.appended, report.rewritten) == (n, 1, 0)
        session.refresh_from_db()
        assert session.head.read().startswith(repaired)
        assert session.fault_counts == {}
    assert path.read_bytes().startswith(broken)


def test_a_file_rewritten_in_place_with_the_same_size_is_read_again(source, root):
    path = root / "s.jsonl"
    write(path, START)
    sync.do_sync_source(source.pk)
    write(path, START.replace(b"list", b"LIST"))
    os.utime(path, (time.time() + 5, time.time() + 5))

    assert sync.do_sync_source(source.pk).rewritten == 1
    assert b"LIST" in session_of(source, "s.jsonl").head.read()


def test_a_renamed_file_keeps_its_session_and_history(source, root):
    write(root / "old.jsonl", START)
    sync.do_sync_source(source.pk)
    session = session_of(source, "old.jsonl")
    (root / "moved").mkdir()
    os.rename(root / "old.jsonl", root / "moved" / "new.jsonl")
    write(root / "moved" / "new.jsonl", ANSWER, "ab")

    report = sync.do_sync_source(source.pk)

    assert (report.renamed, report.new, report.appended, report.deleted) == (1, 0, 1, 0)
    assert session_of(source, "moved/new.jsonl") == session
    session.refresh_from_db()
    assert session.head.read() == START + ANSWER
    assert AuditRecord.objects.get(session=session, op="rename").note == (
        "sync: old.jsonl → moved/new.jsonl"
    )
    assert Session.objects.count() == 1


def test_a_file_copied_then_deleted_is_found_by_its_content(source, root):
    write(root / "a.jsonl", START)
    sync.do_sync_source(source.pk)
    write(root / "b.jsonl", (root / "a.jsonl").read_bytes())
    (root / "a.jsonl").unlink()

    assert sync.do_sync_source(source.pk).renamed == 1
    assert Session.objects.count() == 1
    assert SyncedFile.objects.get().path == "b.jsonl"


def test_a_deleted_file_keeps_its_session_and_can_come_back(source, root):
    path = root / "s.jsonl"
    write(path, START)
    sync.do_sync_source(source.pk)
    session = session_of(source, "s.jsonl")
    path.unlink()

    assert sync.do_sync_source(source.pk).deleted == 1
    synced = SyncedFile.objects.get()
    assert synced.missing_since is not None
    assert session.revisions.count() == 1
    assert "is gone from the folder" in AuditRecord.objects.get(op="delete").note
    assert sync.do_sync_source(source.pk).deleted == 0  # reported once

    write(path, START + ANSWER)
    assert sync.do_sync_source(source.pk).rewritten == 1
    synced.refresh_from_db()
    assert synced.missing_since is None
    assert "reappeared" in AuditRecord.objects.get(op="rewrite").note


def test_a_symlink_out_of_the_folder_is_refused(source, root, tmp_path):
    outside = tmp_path / "secret.jsonl"
    write(outside, START)
    (root / "link.jsonl").symlink_to(outside)
    (root / "inside.jsonl").symlink_to(root / "real.jsonl")
    write(root / "real.jsonl", START)

    report = sync.do_sync_source(source.pk)

    assert report.errors == ["link.jsonl: a symlink that leads out of the source's folder"]
    assert set(SyncedFile.objects.values_list("path", flat=True)) == {
        "inside.jsonl",
        "real.jsonl",
    }
    source.refresh_from_db()
    assert source.error_count == 1
    assert "link.jsonl" in source.last_error


def test_a_sync_already_running_on_the_source_is_skipped(source, root):
    write(root / "s.jsonl", START)
    SyncSource.objects.filter(pk=source.pk).update(
        claim="00000000-0000-0000-0000-000000000001", claimed_at=timezone.now()
    )

    assert sync.do_sync_source(source.pk).skipped
    assert not Session.objects.exists()

    SyncSource.objects.filter(pk=source.pk).update(
        claimed_at=timezone.now() - sync.SYNC_LEASE - timedelta(seconds=1)
    )
    assert sync.do_sync_source(source.pk).new == 1


def test_a_folder_that_is_gone_is_the_sources_error(source, root):
    root.rmdir()

    report = sync.do_sync_source(source.pk)

    source.refresh_from_db()
    assert report.files == 0
    assert source.last_error == f"{root}: no such folder"
    assert source.claim is None


def test_codex_sources_take_rollout_files_only(workspace, alice, root, granted):
    codex = sync.do_create_source(workspace, str(root), acting_user=alice, format="codex")
    (root / "2026" / "11").mkdir(parents=True)
    write(root / "2026" / "11" / "rollout-2026-11-30T01-00-00-abc.jsonl", b'{"type":"x"}\n')
    write(root / "history.jsonl", b'{"type":"x"}\n')

    sync.do_sync_source(codex.pk)

    assert list(SyncedFile.objects.values_list("path", flat=True)) == [
        "2026/11/rollout-2026-11-30T01-00-00-abc.jsonl"
    ]


def test_subagent_sessions_are_linked_to_their_parent(source, root):
    write(root / "s-1.jsonl", START + ANSWER)
    (root / "s-1" / "subagents").mkdir(parents=True)
    write(root / "s-1" / "subagents" / "agent-a1.jsonl", START + ANSWER)
    # Older versions: agent-<id>.jsonl beside the parent, named by the sessionId inside.
    write(root / "agent-b2.jsonl", START + ANSWER)
    write(root / "agent-orphan.jsonl", START.replace(b'"s-1"', b'"s-9"'))

    sync.do_sync_source(source.pk)

    parent = session_of(source, "s-1.jsonl")
    assert session_of(source, "s-1/subagents/agent-a1.jsonl").parent == parent
    assert session_of(source, "agent-b2.jsonl").parent == parent
    assert session_of(source, "agent-orphan.jsonl").parent is None
    assert parent.parent is None
    assert set(parent.subagents.values_list("name", flat=True)) == {
        "s-1/subagents/agent-a1.jsonl",
        "agent-b2.jsonl",
    }


def test_syncs_running_while_an_agent_writes_end_with_exactly_its_bytes(source, root):
    """An agent appends lines in small pieces (partial lines included) while syncs run."""
    path = root / "live.jsonl"
    lines = [START]
    parent = "a1"
    for n in range(2, 40):
        lines.append(result(f"u{n}", parent, "toolu_1") if n == 2 else user(f"u{n}", parent, "go"))
        lines.append(reply(f"a{n}", f"u{n}"))
        parent = f"a{n}"
    data = b"".join(lines)
    write(path, b"")
    done = threading.Event()

    def agent() -> None:
        with open(path, "ab", buffering=0) as f:
            for start in range(0, len(data), 97):
                f.write(data[start : start + 97])
                time.sleep(0.002)
        done.set()

    writer = threading.Thread(target=agent)
    writer.start()
    syncs = 0
    while not done.is_set():
        sync.do_sync_source(source.pk)
        syncs += 1
    writer.join()
    sync.do_sync_source(source.pk)

    session = session_of(source, "live.jsonl")
    assert session.head.read() == data
    assert syncs > 1
    assert list(AuditRecord.objects.filter(op="rewrite").values_list("note", flat=True)) == []
    assert session.revisions.count() == 1 + AuditRecord.objects.filter(op="append").count()


def test_a_file_written_before_the_source_was_made_live_is_not_live(source, root):
    path = root / "s.jsonl"
    write(path, START)
    age(path)

    sync.do_sync_source(source.pk)

    session = session_of(source, "s.jsonl")
    assert session.fault_counts == {"missing_result": 1}
    assert not session.is_live()


def test_a_file_that_cannot_be_read_is_reported_and_the_rest_sync(source, root, monkeypatch):
    write(root / "a.jsonl", START)
    write(root / "b.jsonl", START)
    sync.do_sync_source(source.pk)
    write(root / "a.jsonl", ANSWER, "ab")
    write(root / "b.jsonl", ANSWER, "ab")
    real_read = sync._read

    def read(path, start=0, end=None):
        if path.name == "a.jsonl":
            raise PermissionError(13, "Permission denied")
        return real_read(path, start, end)

    monkeypatch.setattr(sync, "_read", read)
    report = sync.do_sync_source(source.pk)

    assert (report.errors, report.appended) == (["a.jsonl: Permission denied"], 1)
    assert SyncedFile.objects.get(path="a.jsonl").error == "Permission denied"
    source.refresh_from_db()
    assert (source.error_count, source.last_error) == (1, "a.jsonl: Permission denied")
    monkeypatch.undo()
    assert sync.do_sync_source(source.pk).appended == 1
    assert SyncedFile.objects.get(path="a.jsonl").error == ""


def test_a_new_file_on_a_freed_inode_is_a_new_session(source, root, monkeypatch):
    write(root / "alpha.jsonl", START)
    sync.do_sync_source(source.pk)
    other = user("x1", None, "another task entirely") + reply("x2", "x1")
    (root / "alpha.jsonl").unlink()
    write(root / "beta.jsonl", other)
    # Whatever inode the filesystem gave it, make it alpha's, as ext4 often does.
    synced = SyncedFile.objects.get(path="alpha.jsonl")
    SyncedFile.objects.filter(pk=synced.pk).update(inode=(root / "beta.jsonl").stat().st_ino)

    report = sync.do_sync_source(source.pk)

    assert (report.renamed, report.new, report.deleted) == (0, 1, 1)
    assert session_of(source, "beta.jsonl").head.read() == other
    assert session_of(source, "alpha.jsonl").head.read() == START


def test_a_folder_overlapping_another_source_is_refused(source, root, workspace, alice):
    sync.do_grant_folder(workspace, str(root.parent), acting_user=None)
    (root / "inner").mkdir()
    for path in (root / "inner", root.parent):
        with pytest.raises(sync.SyncError, match="overlaps the source"):
            sync.do_create_source(workspace, str(path), acting_user=alice)


def test_a_synced_session_takes_no_appends_from_elsewhere(source, root, alice):
    write(root / "s.jsonl", START)
    sync.do_sync_source(source.pk)

    with pytest.raises(sync.AppendError) as caught:
        sync.do_append_records(session_of(source, "s.jsonl"), ANSWER, acting_user=alice)

    assert caught.value.code == "synced"


def test_a_file_rewritten_while_it_is_copied_is_read_again_next_time(source, root, monkeypatch):
    padding = b"".join(user(f"p{n}", f"p{n - 1}" if n else None, "x" * 9000) for n in range(300))
    path = root / "s.jsonl"
    write(path, padding + START)
    real_rest = sync._rest

    def rest_then_rewrite(f):
        chunks = real_rest(f)
        yield next(chunks)
        write(path, START + ANSWER + padding)  # an editor's save: cut, then written anew
        yield from chunks

    monkeypatch.setattr(sync, "_rest", rest_then_rewrite)
    report = sync.do_sync_source(source.pk)
    assert (report.new, report.waiting) == (0, 1)
    assert not SyncedFile.objects.exists()
    monkeypatch.setattr(sync, "_rest", real_rest)
    assert sync.do_sync_source(source.pk).new == 1
    assert session_of(source, "s.jsonl").head.read() == START + ANSWER + padding
