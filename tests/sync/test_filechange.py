"""What a sync makes of a file, decided from what was stored and what is on disk: no I/O."""

import pytest

from transcripts.filechange import (
    Change,
    OnDisk,
    Stored,
    decide,
    rename_candidates,
    rewrite_reason,
)

# Last seen: 100 bytes read, 90 taken (a partial line of 10 waits), inode 7.
SEEN = Stored(size=100, mtime_ns=1_000, inode=7, offset=90)
GONE = Stored(size=100, mtime_ns=1_000, inode=7, offset=90, gone=True)
NO_MIRROR = Stored(size=100, mtime_ns=1_000, inode=7, offset=90, mirrored=False)


def disk(size=100, mtime_ns=1_000, inode=7, lines=True, device=0):
    return OnDisk(size=size, mtime_ns=mtime_ns, inode=inode, lines=lines, device=device)


# (stored, on disk, same_ends, mirrors_prefix, verdict)
TABLE = [
    pytest.param(None, disk(), None, None, Change.NEW, id="never seen: new"),
    pytest.param(SEEN, disk(), None, None, Change.UNCHANGED, id="same stat: unchanged"),
    pytest.param(GONE, disk(), None, None, Change.REWRITE, id="same stat after gone: rewrite"),
    pytest.param(
        SEEN, disk(size=150, mtime_ns=2_000), None, None, Change.CHECK_ENDS, id="grew: check ends"
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        True,
        None,
        Change.CHECK_MIRROR,
        id="grew, ends in place: check the mirror (the middle may have changed)",
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        True,
        True,
        Change.APPEND,
        id="grew, ends in place, prefix is the mirrored revision: append",
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        True,
        False,
        Change.REWRITE,
        id="grew, ends in place but a byte between them changed: rewrite",
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        False,
        None,
        Change.CHECK_MIRROR,
        id="grew, ends changed: check the mirror",
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        False,
        True,
        Change.APPEND,
        id="grew, prefix is the mirrored revision: append",
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000),
        False,
        False,
        Change.REWRITE,
        id="grew, prefix changed: rewrite",
    ),
    pytest.param(
        SEEN,
        disk(size=100, mtime_ns=2_000),
        None,
        None,
        Change.CHECK_MIRROR,
        id="touched, not grown: check the mirror",
    ),
    pytest.param(
        SEEN,
        disk(size=95, mtime_ns=2_000),
        None,
        True,
        Change.APPEND,
        id="partial line rewritten, prefix in place: append",
    ),
    pytest.param(
        SEEN, disk(size=89, mtime_ns=2_000), None, None, Change.REWRITE, id="shrank below offset"
    ),
    pytest.param(
        SEEN, disk(size=90, mtime_ns=2_000), None, False, Change.REWRITE, id="at offset, changed"
    ),
    pytest.param(
        SEEN,
        disk(size=150, mtime_ns=2_000, lines=False),
        None,
        None,
        Change.REWRITE,
        id="a JSON document: always rewritten",
    ),
    pytest.param(
        SEEN,
        disk(inode=8),
        None,
        None,
        Change.CHECK_MIRROR,
        id="replaced by another file of the same size: check the mirror",
    ),
    pytest.param(
        NO_MIRROR,
        disk(size=150, mtime_ns=2_000),
        False,
        None,
        Change.REWRITE,
        id="ends changed, no mirrored revision: rewrite",
    ),
    pytest.param(
        NO_MIRROR,
        disk(size=150, mtime_ns=2_000),
        True,
        None,
        Change.APPEND,
        id="ends in place, no mirror needed: append",
    ),
    pytest.param(
        GONE, disk(size=150, mtime_ns=2_000), True, True, Change.REWRITE, id="came back: rewrite"
    ),
]


@pytest.mark.parametrize(("stored", "on_disk", "same_ends", "mirrors", "verdict"), TABLE)
def test_decide(stored, on_disk, same_ends, mirrors, verdict):
    assert decide(stored, on_disk, same_ends=same_ends, mirrors_prefix=mirrors) is verdict


@pytest.mark.parametrize(
    ("stored", "on_disk", "reason"),
    [
        (GONE, disk(size=150), "reappeared"),
        (SEEN, disk(size=50), "shrank"),
        (SEEN, disk(size=150), "changed before its old end"),
        (SEEN, disk(size=150, lines=False), "changed"),
    ],
)
def test_rewrite_reason(stored, on_disk, reason):
    assert rewrite_reason(stored, on_disk) == reason


def test_a_rename_candidate_must_fit_and_the_same_inode_comes_first():
    gone = [
        ("a.jsonl", Stored(size=10, mtime_ns=1, inode=1, offset=10), 0),
        ("too-long.jsonl", Stored(size=500, mtime_ns=1, inode=2, offset=500), 0),
        ("same-inode.jsonl", Stored(size=20, mtime_ns=1, inode=3, offset=20), 0),
        ("other-device.jsonl", Stored(size=20, mtime_ns=1, inode=3, offset=20), 1),
    ]
    found = rename_candidates(gone, disk(size=100, inode=3, device=0))
    assert found == ["same-inode.jsonl", "a.jsonl", "other-device.jsonl"]
