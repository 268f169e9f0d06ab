"""Replace a synced session's source file with a new revision's bytes, safely.

A write-back happens only where the source opted in (`SyncSource.write_back`)
and only while the file is still exactly what the repaired revision was made
from: same size and modification time as the last sync saw, no partial line
waiting beyond the synced bytes, and the same sha256 as that revision. The
steps (a temporary file in the same folder, fsynced, the original kept as a
timestamped backup, a rename, the folder fsynced) are `transcripts.replace`'s,
which `pairfix fix --in-place` shares; an agent that writes between the check
and the rename is caught by a second stat just before the rename.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from transcripts.models import Revision, Session, SyncedFile
from transcripts.replace import (
    BACKUP_MARK,
    TEMP_PREFIX,
    FileChanged,
    is_own_file,
    replace_file,
    sha256_of,
)

__all__ = [
    "BACKUP_MARK",
    "TEMP_PREFIX",
    "WriteBack",
    "WriteBackRefused",
    "check",
    "fingerprints",
    "is_own_file",
]


class WriteBackRefused(Exception):
    """The source file is not what the revision was made from: writing it would lose data."""


def fingerprints(data: bytes) -> tuple[str, str]:
    """Return sha256 (hex) of the first and of the last SyncedFile.FINGERPRINT_BYTES of `data`."""
    n = SyncedFile.FINGERPRINT_BYTES
    return hashlib.sha256(data[:n]).hexdigest(), hashlib.sha256(data[-n:]).hexdigest()


def file_fingerprints(path: Path, size: int) -> tuple[str, str]:
    """Return `fingerprints` of the file at `path` (`size` bytes), reading only its ends."""
    n = SyncedFile.FINGERPRINT_BYTES
    with open(path, "rb") as f:
        head = f.read(n)
        f.seek(max(0, size - n))
        tail = f.read(n)
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


@dataclass
class WriteBack:
    """A checked source file, ready to be replaced by `replace`."""

    synced: SyncedFile
    path: Path

    def replace(
        self, content: Callable[[], Iterable[bytes]], revision: Revision, *, now: datetime
    ) -> str:
        """Write the bytes `content()` yields (`revision`'s) over the file; return the backup.

        Records the new file's stat and fingerprints on the SyncedFile (save it
        in the caller's transaction, which also writes `revision`). Raises
        WriteBackRefused if the file changed since `check` or another process
        holds it open for writing (an agent still running), OSError if the
        folder cannot be written; either way the original file is untouched.
        """
        try:
            backup = replace_file(
                self.path,
                lambda f: f.writelines(content()),
                lambda: _check_stat(self.synced, self.path),
                now=now,
            )
        except FileChanged as exc:  # held open, or written to in the moment of the rename
            raise WriteBackRefused(str(exc)) from None
        stat = self.path.stat()
        head, tail = file_fingerprints(self.path, stat.st_size)
        synced = self.synced
        synced.size = synced.offset = stat.st_size
        synced.mtime_ns, synced.inode, synced.device = stat.st_mtime_ns, stat.st_ino, stat.st_dev
        synced.head_hash, synced.tail_hash = head, tail
        synced.revision = revision
        return backup.name


def check(session: Session, base: Revision) -> WriteBack | None:
    """Return a WriteBack for `session` if its source writes back, None if it does not.

    Raises WriteBackRefused (the reason in words) when the file is gone, has
    changed since the last sync, holds a partial line beyond the synced
    bytes, or its bytes are not `base`'s (the revision being repaired). The
    revision last synced need not be `base` itself, only hold its bytes.
    """
    try:
        synced = SyncedFile.objects.select_related("source", "revision").get(session=session)
    except SyncedFile.DoesNotExist:
        return None
    if not synced.source.write_back:
        return None
    path = Path(synced.source.path) / synced.path
    if synced.missing_since is not None or not path.is_file():
        raise WriteBackRefused(f"{path}: the source file is gone")
    # A revision of the same bytes (a rollback made while write-back was off) is the file too.
    if synced.revision_id != base.pk and (
        synced.revision is None or synced.revision.sha256 != base.sha256
    ):
        raise WriteBackRefused(
            f"{path}: revision {base.number} is not the file's content as last synced"
        )
    _check_stat(synced, path)
    if synced.offset != synced.size:
        raise WriteBackRefused(f"{path}: the file ends in a line still being written")
    if sha256_of(path) != base.sha256:
        raise WriteBackRefused(f"{path}: the file's bytes differ from revision {base.number}")
    return WriteBack(synced, path)


def _check_stat(synced: SyncedFile, path: Path) -> None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise WriteBackRefused(f"{path}: the source file is gone") from None
    if (stat.st_size, stat.st_mtime_ns, stat.st_ino) != (
        synced.size,
        synced.mtime_ns,
        synced.inode,
    ):
        raise WriteBackRefused(
            f"{path}: the file changed since the last sync "
            f"({synced.size} → {stat.st_size} bytes); sync it and repair again"
        )
