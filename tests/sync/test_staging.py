"""A sync or an append stages its bytes on disk: no staged file stays behind, done or failed.

The failures are real ones: a storage whose disk is full (a FileSystemStorage
that refuses every write with ENOSPC), a head blob cut short in storage.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import FileSystemStorage, default_storage

from tests.sync.conftest import age, call, reply, result, user
from transcripts import actions, tasks, uploads
from transcripts.actions import sync
from transcripts.models import AuditRecord, BlobUnreadable, Revision, SyncedFile, blob_name
from transcripts.uploads import StagingFile

pytestmark = pytest.mark.django_db

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
ANSWER = result("u2", "a1", "toolu_1") + reply("a2", "u2")
MORE = user("u3", "a2", "and now?") + reply("a3", "u3")


class FullDisk(FileSystemStorage):
    """Local blob storage on a disk with no space left: every write fails."""

    def _save(self, name: str, content: Any, max_length: int | None = None) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def staging(tmp_path: Path, settings: Any) -> Path:
    """Return the staging folder (FILE_UPLOAD_TEMP_DIR), empty; blobs go to a folder of the test's.

    Blobs are content-addressed: one stored by an earlier test would not be written again.
    """
    folder = tmp_path / "staging"
    folder.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(folder)
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return folder


def fill_disk(settings: Any) -> None:
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": f"{__name__}.FullDisk"}}


def write(path: Path, data: bytes, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
    age(path)


def test_a_staged_file_holds_the_complete_lines_hashed_across_chunks(staging):
    line = b'{"a":"' + b"x" * (3 << 20) + b'"}\n'  # a line longer than a chunk
    data = line + line + b'{"half'
    with StagingFile("s.jsonl", lines=True) as staging_file:
        for at in range(0, len(data), 1 << 20):
            staging_file.write(data[at : at + (1 << 20)])
        staged = staging_file.finish()
        assert staged.path.read_bytes() == line + line
        assert (staged.size, staged.sha256) == (2 * len(line), hashlib.sha256(line * 2).hexdigest())
        assert staging_file.written == 2 * len(line) + len(b'{"half')
    assert list(staging.iterdir()) == []


def test_syncs_leave_no_staged_file(source, root, staging, monkeypatch):
    monkeypatch.setattr(sync, "GROW_INLINE", 100)  # every append is staged
    write(root / "s.jsonl", START)
    assert sync.do_sync_source(source.pk).new == 1
    write(root / "s.jsonl", ANSWER + b'{"type":', "ab")
    assert sync.do_sync_source(source.pk).appended == 1
    write(root / "s.jsonl", MORE)  # a rewrite
    assert sync.do_sync_source(source.pk).rewritten == 1

    session = SyncedFile.objects.get(path="s.jsonl").session
    assert session.head.read() == MORE
    assert session.revisions.get(number=1).read() == START + ANSWER
    assert list(staging.iterdir()) == []


@pytest.mark.parametrize("inline", [sync.GROW_INLINE, 100])
def test_a_failed_sync_leaves_no_staged_file_and_nothing_stored(
    source, root, staging, settings, monkeypatch, inline
):
    monkeypatch.setattr(sync, "GROW_INLINE", inline)
    write(root / "s.jsonl", START)
    sync.do_sync_source(source.pk)
    synced = SyncedFile.objects.get(path="s.jsonl")
    fill_disk(settings)
    write(root / "new.jsonl", START + ANSWER)
    write(root / "s.jsonl", ANSWER, "ab")

    report = sync.do_sync_source(source.pk)

    no_space = os.strerror(errno.ENOSPC)
    assert report.errors == [f"new.jsonl: {no_space}", f"s.jsonl: {no_space}"]
    assert list(staging.iterdir()) == []
    assert not SyncedFile.objects.filter(path="new.jsonl").exists()
    after = SyncedFile.objects.get(pk=synced.pk)
    assert (after.offset, after.revision_id, after.error) == (
        len(START),
        synced.revision_id,
        no_space,
    )
    assert synced.session.revisions.count() == 1

    write(root / "s.jsonl", MORE)  # now a rewrite, which fails the same way
    assert sync.do_sync_source(source.pk).errors[-1] == f"s.jsonl: {no_space}"
    assert list(staging.iterdir()) == []


def test_a_failed_append_leaves_no_staged_file_and_the_head_as_it_was(
    workspace, alice, staging, settings
):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)
    fill_disk(settings)

    with pytest.raises(OSError, match=os.strerror(errno.ENOSPC)):
        sync.do_append_records(session, ANSWER, acting_user=alice)

    session.refresh_from_db()
    assert (session.head.number, session.revisions.count()) == (0, 1)
    assert not AuditRecord.objects.filter(op="append").exists()
    assert list(staging.iterdir()) == []


def test_an_append_onto_a_head_cut_short_in_storage_fails_and_leaves_no_staged_file(
    workspace, alice, staging
):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)
    with default_storage.open(blob_name(session.head.sha256), "wb") as f:
        f.write(START[:-10])

    cut = f"holds {len(START) - 10} bytes, not the {len(START)} stored"
    with pytest.raises(BlobUnreadable, match=cut):
        sync.do_append_records(session, ANSWER, acting_user=alice)

    assert Revision.objects.filter(session=session).count() == 1
    assert list(staging.iterdir()) == []


def test_an_append_at_the_end_of_the_chain_stores_the_staged_whole(workspace, alice, staging):
    session = actions.do_ingest_session(workspace, "s.jsonl", START, acting_user=alice)
    sent = b""
    for n in range(Revision.MAX_CHAIN + 1):
        more = user(f"m{n}", "a1" if n == 0 else f"r{n - 1}", "again") + reply(f"r{n}", f"m{n}")
        sync.do_append_records(session, more, acting_user=alice)
        sent += more

    session.refresh_from_db()
    head = session.head
    assert (head.chain, head.delta, head.size) == (0, "", len(START + sent))
    assert default_storage.size(blob_name(head.sha256)) == len(START + sent)
    assert head.read() == START + sent
    assert list(staging.iterdir()) == []


def test_a_staged_file_left_by_a_killed_process_is_swept(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    now = time.time()
    old, fresh, other = tmp_path / "staged-old", tmp_path / "staged-new", tmp_path / "x.upload"
    for path in (old, fresh, other):
        path.write_bytes(b"{}\n")
    os.utime(old, (now - uploads.STAGED_MAX_AGE - 60,) * 2)
    os.utime(other, (now - uploads.STAGED_MAX_AGE - 60,) * 2)
    assert uploads.sweep_staged(now) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["staged-new", "x.upload"]
    tasks.sweep_jobs()  # the beat's sweep runs it too
    tasks.sync_all_sources()
