"""What a sync makes of a file: new, unchanged, an append, a rewrite, or a rename of a gone one.

Pure decisions, no I/O and no Django: the sync (`transcripts.actions.sync`)
gathers the facts and carries the verdict out. A fact that costs reading
the file is asked for only when the cheaper ones leave the question open:
`decide` then answers CHECK_ENDS (compare the fingerprints of the bytes
before the old end) or CHECK_MIRROR (hash the first `offset` bytes against
the revision the file mirrored), and is asked again with the fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Change(StrEnum):
    """The verdict on one file; the first five are final."""

    NEW = "new"
    UNCHANGED = "unchanged"
    APPEND = "append"
    REWRITE = "rewrite"
    CHECK_ENDS = "check_ends"
    CHECK_MIRROR = "check_mirror"


@dataclass(frozen=True)
class Stored:
    """What the last sync saw of a file (a SyncedFile's fields).

    `size` is the bytes read (stat size may have been smaller), `offset` the
    bytes taken (up to the last whole line), `gone` whether the file was
    missing from the folder, `mirrored` whether a revision is known to hold
    exactly the first `offset` bytes.
    """

    size: int
    mtime_ns: int
    inode: int
    offset: int
    gone: bool = False
    mirrored: bool = True


@dataclass(frozen=True)
class OnDisk:
    """What the file's stat says now, and whether it holds JSON lines (appendable)."""

    size: int
    mtime_ns: int
    inode: int
    lines: bool = True
    device: int = 0


def decide(
    stored: Stored | None,
    disk: OnDisk,
    *,
    same_ends: bool | None = None,
    mirrors_prefix: bool | None = None,
) -> Change:
    """Return what to do with a file seen as `disk` that the last sync saw as `stored`.

    A file never seen is NEW; one whose size, mtime and inode are as seen
    (and that was not gone) is UNCHANGED. A JSON-lines file, grown or not,
    whose first `offset` bytes hash to the revision it mirrored
    (`mirrors_prefix`) is an APPEND from the old end. One that grew past what
    was read has the fingerprints of the first and last
    SyncedFile.FINGERPRINT_BYTES before its old end compared first
    (`same_ends`): changed, it is no append; in place, it is hashed as above
    when it mirrored a revision (a byte changed in its middle is then seen),
    and an APPEND on the ends alone when it mirrored none.
    Anything else, a JSON document, a file that shrank below the offset or
    came back after it was gone, is a REWRITE. A fact needed and not given
    (None) makes the answer CHECK_ENDS or CHECK_MIRROR.
    """
    if stored is None:
        return Change.NEW
    if not stored.gone and (disk.size, disk.mtime_ns, disk.inode) == (
        stored.size,
        stored.mtime_ns,
        stored.inode,
    ):
        return Change.UNCHANGED
    if not disk.lines or stored.gone or disk.size < stored.offset:
        return Change.REWRITE
    if disk.size > stored.size:
        if same_ends is None:
            return Change.CHECK_ENDS
        if same_ends and not stored.mirrored:
            return Change.APPEND  # nothing to hash against: the ends are all there is
    if not stored.mirrored:
        return Change.REWRITE
    if mirrors_prefix is None:
        return Change.CHECK_MIRROR
    return Change.APPEND if mirrors_prefix else Change.REWRITE


def rewrite_reason(stored: Stored, disk: OnDisk) -> str:
    """Return how a rewritten file changed, in words for its audit note."""
    if stored.gone:
        return "reappeared"
    if disk.size < stored.offset:
        return "shrank"
    return "changed before its old end" if disk.lines else "changed"


def rename_candidates(gone: Iterable[tuple[str, Stored, int]], disk: OnDisk) -> Sequence[str]:
    """Return the paths of the gone files (path, stored, device) that a new file may be.

    Only a gone file at most as long as the new one can be it; the one with
    the new file's inode and device comes first. The inode alone proves
    nothing (a filesystem hands a freed inode to the next new file at once):
    the caller still compares the fingerprints of each candidate's bytes.
    """
    fitting = [
        (path, stored, device) for path, stored, device in gone if disk.size >= stored.offset
    ]
    fitting.sort(key=lambda c: (c[1].inode, c[2]) != (disk.inode, disk.device))
    return [path for path, _, _ in fitting]
