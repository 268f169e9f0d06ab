"""Write-back: a repair job replaces a synced file, only while it is what was repaired."""

from pathlib import Path

import pytest

from tests.helpers import held_open, run_inline
from tests.sync.conftest import age, call, reply, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.engine import analyze
from transcripts.models import AuditRecord, SyncedFile, SyncSource
from transcripts.writeback import BACKUP_MARK

pytestmark = pytest.mark.django_db

# The call toolu_1 never got its result; the next user turn makes it a missing_result.
BROKEN = (
    user("u1", None, "list the files")
    + call("a1", "u1", "toolu_1")
    + user("u2", "a1", "hello?")
    + reply("a2", "u2")
)


@pytest.fixture
def writing_source(granted: Path, workspace, alice) -> SyncSource:
    return sync.do_create_source(
        workspace, str(granted), acting_user=alice, format="claude_code", write_back=True
    )


def synced(root: Path, source: SyncSource, data: bytes = BROKEN) -> SyncedFile:
    path = root / "s.jsonl"
    path.write_bytes(data)
    age(path)
    sync.do_sync_source(source.pk)
    return SyncedFile.objects.select_related("session").get(source=source)


def repair(session, alice):
    job = actions.do_start_job(session.workspace, [session], policy="synthesize", acting_user=alice)
    return run_inline(job).items.get()


def test_a_repair_replaces_the_file_and_keeps_a_backup(root, writing_source, alice):
    session = synced(root, writing_source).session

    item = repair(session, alice)

    assert item.status == "repaired"
    expected = analyze(BROKEN, "s.jsonl", "synthesize", format="claude_code").repaired
    assert (root / "s.jsonl").read_bytes() == expected == item.revision.read()
    backups = [p for p in root.iterdir() if BACKUP_MARK in p.name]
    assert len(backups) == 1 and backups[0].read_bytes() == BROKEN
    audit = AuditRecord.objects.get(op="write_back")
    assert audit.job == item.job and audit.revision_to == item.revision
    assert audit.note.endswith(f"the file before is {backups[0].name}")
    # The next sync sees its own write: no new revision, no rewrite.
    report = sync.do_sync_source(writing_source.pk)
    assert (report.unchanged, report.rewritten, report.files) == (1, 0, 1)
    session.refresh_from_db()
    assert session.head == item.revision


def test_the_agent_appending_after_a_write_back_is_an_append(root, writing_source, alice):
    session = synced(root, writing_source).session
    repair(session, alice)
    with open(root / "s.jsonl", "ab") as f:
        f.write(user("u3", "a2", "thanks"))

    assert sync.do_sync_source(writing_source.pk).appended == 1


def test_a_file_that_grew_since_the_sync_is_not_written(root, writing_source, alice):
    session = synced(root, writing_source).session
    grown = BROKEN + user("u3", "a2", "more")
    (root / "s.jsonl").write_bytes(grown)

    item = repair(session, alice)

    assert item.status == "fence_lost"
    assert "the file changed since the last sync" in item.error
    assert (root / "s.jsonl").read_bytes() == grown
    assert session.revisions.count() == 1
    assert not [p for p in root.iterdir() if BACKUP_MARK in p.name]


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="reads Linux's /proc")
def test_a_file_the_agent_holds_open_for_writing_is_not_written(root, writing_source, alice):
    session = synced(root, writing_source).session

    with held_open(root / "s.jsonl", "ab") as pid:
        item = repair(session, alice)

    assert item.status == "fence_lost"
    assert f"held open for writing by process {pid}" in item.error
    assert (root / "s.jsonl").read_bytes() == BROKEN
    assert not [p for p in root.iterdir() if BACKUP_MARK in p.name or ".pairfix-tmp" in p.name]


def test_a_file_with_a_partial_line_is_not_written(root, writing_source, alice):
    session = synced(root, writing_source, BROKEN + b'{"type":"user","mess').session

    item = repair(session, alice)

    assert item.status == "fence_lost"
    assert "a line still being written" in item.error
    assert (root / "s.jsonl").read_bytes().endswith(b'"mess')


def test_a_file_that_is_gone_is_not_written(root, writing_source, alice):
    session = synced(root, writing_source).session
    (root / "s.jsonl").unlink()

    item = repair(session, alice)

    assert (item.status, item.error) == (
        "fence_lost",
        f"{root / 's.jsonl'}: the source file is gone",
    )


def test_without_write_back_the_file_is_left_alone(root, source, alice):
    session = synced(root, source).session

    assert repair(session, alice).status == "repaired"

    assert (root / "s.jsonl").read_bytes() == BROKEN
    assert not AuditRecord.objects.filter(op="write_back").exists()


def test_rolling_back_the_job_writes_the_file_before_back(root, writing_source, alice):
    session = synced(root, writing_source).session
    item = repair(session, alice)

    rollback = run_inline(actions.do_start_rollback_job(item.job, acting_user=alice))

    assert rollback.items.get().status == "rolled_back"
    assert (root / "s.jsonl").read_bytes() == BROKEN
    assert AuditRecord.objects.filter(op="write_back").count() == 2
    assert sync.do_sync_source(writing_source.pk).unchanged == 1


def test_a_head_rolled_back_to_the_files_bytes_writes_back(root, source, alice):
    # Repaired and rolled back while write-back was off: the head is a new revision with
    # the file's own bytes, so turning write-back on and repairing again writes the file.
    session = synced(root, source).session
    item = repair(session, alice)
    run_inline(actions.do_start_rollback_job(item.job, acting_user=alice))
    session.refresh_from_db()
    assert session.head.number == 2 and session.head.sha256 == item.job.items.get().base.sha256
    source.write_back = True
    source.save(update_fields=["write_back"])

    again = repair(session, alice)

    assert again.status == "repaired", again.error
    expected = analyze(BROKEN, "s.jsonl", "synthesize", format="claude_code").repaired
    assert (root / "s.jsonl").read_bytes() == expected


def test_a_rollback_leaves_a_file_the_agent_wrote_to_since(root, writing_source, alice):
    session = synced(root, writing_source).session
    item = repair(session, alice)
    with open(root / "s.jsonl", "ab") as f:
        f.write(user("u3", "a2", "thanks"))
    repaired_and_more = (root / "s.jsonl").read_bytes()

    rollback = run_inline(actions.do_start_rollback_job(item.job, acting_user=alice))

    assert rollback.items.get().status == "fence_lost"
    assert (root / "s.jsonl").read_bytes() == repaired_and_more
