"""Replace a session file in place, only while it is still the file that was read.

Pure Python (no Django): shared by sync write-back (`transcripts.writeback`)
and `pairfix fix --in-place` (`transcripts.cli`). The new bytes go to a
temporary file in the same folder and are fsynced; the caller's fence check
runs once they are on disk, just before the rename; the original is kept
beside it as a timestamped backup (a hard link: no copy, no moment without a
file), the temporary file is renamed over the original, and the folder is
fsynced. The backup is then checked: if an agent wrote to the original
between the fence and the rename, the original is put back.

A file another process holds open for writing is never replaced: an agent
that keeps its session file open (Codex keeps its rollout file open for the
whole session; Claude Code opens it for each append) would go on appending
to the replaced file, and those records would be lost. On Linux the check
reads /proc; a process of another user who may write the file, whose
descriptors cannot be listed, counts as holding it; elsewhere the check
finds nothing, and only the fence protects the file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

BACKUP_MARK = ".pairfix-backup-"
TEMP_PREFIX = ".pairfix-tmp-"
_READ = 1 << 20  # bytes per read when hashing
# The names `backup_path` gives (the stamp is UTC to the microsecond) and the ones
# tempfile.mkstemp gives under TEMP_PREFIX (eight of its letters, digits and "_").
# DOTALL: a file name may hold a newline, and its backup's name then does too.
_OWN_NAME = re.compile(
    rf"(.+{re.escape(BACKUP_MARK)}\d{{8}}T\d{{12}}Z|{re.escape(TEMP_PREFIX)}[a-z0-9_]{{8}})",
    re.DOTALL,
)


class FileChanged(Exception):
    """The file is not what was read: replacing it would lose what was written since."""


class FileInUse(FileChanged):
    """Another process holds the file open for writing: what it writes next would be lost."""


class SymlinkRefused(OSError):
    """The path is a symbolic link: replacing it would turn the link into a regular file,
    leave its target unrepaired and make the backup a hard link to the link itself."""


def is_own_file(name: str) -> bool:
    """Return True for the backups and temporary files a replacement leaves in a folder.

    Only names made as those are (`backup_path`'s `NAME.pairfix-backup-
    20260101T000000000000Z`, a temporary `.pairfix-tmp-` and eight characters)
    count: a session a user named `notes.pairfix-backup-ideas.jsonl` is theirs.
    """
    return _OWN_NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class Stamp:
    """What `stat` says of a file: size (bytes), modification time (ns) and inode."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> Stamp:
        """Return the stamp of `path`; raise FileChanged if it is gone."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise FileChanged(f"{path}: the file is gone") from None
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino)


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of the file at `path`, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_READ):
            digest.update(chunk)
    return digest.hexdigest()


def check_unchanged(path: Path, stamp: Stamp, sha256: str) -> None:
    """Raise FileChanged unless `path` still has `stamp` and bytes of digest `sha256`."""
    now = Stamp.of(path)
    if now != stamp:
        raise FileChanged(
            f"{path}: the file changed while it was read ({stamp.size} → {now.size} bytes); "
            "nothing was written"
        )
    if sha256_of(path) != sha256:
        raise FileChanged(
            f"{path}: the file's bytes changed while it was read; nothing was written"
        )
    if Stamp.of(path) != stamp:
        raise FileChanged(f"{path}: the file changed while it was read; nothing was written")


def writers_of(path: Path) -> list[tuple[int, str]]:
    """Return (pid, command name) of each other process holding `path` open for writing.

    Reads Linux's /proc: each /proc/PID/fd entry that is the file (same device
    and inode) with a write access mode in /proc/PID/fdinfo. A process whose
    descriptors this user may not list (another user's) is returned too, its
    command marked "not inspectable", when its user could open the file for
    writing (its owner, a group with the group write bit, or anyone with the
    other write bit): it may hold the file, and nothing says it does not.
    Root's processes are not counted so. Without /proc (macOS, Windows) the
    list is empty. Never raises.
    """
    try:
        target = os.stat(path)
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    key, me, found = (target.st_dev, target.st_ino), os.getpid(), []
    for pid in pids:
        if pid == me:
            continue
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except PermissionError:
            if _could_write(pid, target):
                found.append((pid, f"{_command(pid)}, another user's: not inspectable"))
            continue
        except OSError:
            continue
        for fd in fds:
            try:
                opened = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            if (opened.st_dev, opened.st_ino) == key and _opened_for_writing(pid, fd):
                found.append((pid, _command(pid)))
                break
    return found


def _could_write(pid: int, target: os.stat_result) -> bool:
    """Return True when process `pid` (not root) could open the file `target` for writing."""
    uid, groups = -1, set()
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == "Uid":
                    uid = int(value.split()[1])  # the effective uid
                elif name == "Gid":
                    groups.add(int(value.split()[1]))
                elif name == "Groups":
                    groups.update(int(g) for g in value.split())
    except (OSError, ValueError, IndexError):
        return False  # gone, or unreadable: nothing to go on
    if uid <= 0:
        return False
    mode = target.st_mode
    return bool(
        (uid == target.st_uid and mode & 0o200)
        or (target.st_gid in groups and mode & 0o020)
        or mode & 0o002
    )


def _opened_for_writing(pid: int, fd: str) -> bool:
    """Return True when descriptor `fd` of `pid` was opened write-only or read-write."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & (os.O_WRONLY | os.O_RDWR) != 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def check_not_held_open(path: Path) -> None:
    """Raise FileInUse when another process holds `path` open for writing (see `writers_of`)."""
    writers = writers_of(path)
    if writers:
        who = ", ".join(f"process {pid} ({command})" for pid, command in writers)
        raise FileInUse(
            f"{path}: held open for writing by {who}, which would go on writing to the "
            "replaced file; nothing was written (stop it first)"
        )


def backup_path(path: Path, now: datetime) -> Path:
    """Return where the backup of `path` made at `now` (UTC) goes: beside it, timestamped."""
    return path.with_name(f"{path.name}{BACKUP_MARK}{now.strftime('%Y%m%dT%H%M%S%fZ')}")


def replace_file(
    path: Path, write: Callable[[BinaryIO], None], fence: Callable[[], None], *, now: datetime
) -> Path:
    """Replace `path` with what `write` writes, keeping the original as a backup; return it.

    `write(f)` writes the new content to the temporary file `f`; `fence()`
    runs once that content is on disk, just before the rename, and raises if
    `path` must not be replaced (its exception propagates). The new file
    keeps the original's permission bits, owner and group. Raises FileInUse
    if another process holds `path` open for writing, SymlinkRefused if
    `path` is a symbolic link, PermissionError if the owner cannot be kept
    and OSError if the folder cannot be written: the original file is then
    untouched and no temporary file is left. Raises FileChanged if the
    original was written to in the moment of the rename (an agent's append
    opened just before it): the original, with what was written, is then put
    back in place of the new file, or, if the new file was written to as
    well, both are kept and the message says where.
    """
    if path.is_symlink():
        raise SymlinkRefused("is a symbolic link; not replaced (replace its target instead)")
    backup = backup_path(path, now)
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _keep_mode_and_owner(temp, os.stat(path))
        # The scan of /proc comes before the fence, not between it and the rename.
        check_not_held_open(path)
        # Taken before the fence: a write after this stat either fails the fence or is
        # seen after the rename, never slips between the fence's last look and this one.
        fenced = os.stat(path)
        fence()
        written = os.stat(temp)
        os.link(path, backup)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    _fsync_dir(path.parent)
    # A process that opened the file after the scan above (during the fence's hashing,
    # say) holds the original, now the backup, and would go on writing there: looked for
    # before the sizes are compared, so one that wrote and closed since is seen by them.
    holders = writers_of(backup)
    _check_not_written_meanwhile(path, backup, fenced, written, holders)
    return backup


def _keep_mode_and_owner(temp: str, original: os.stat_result) -> None:
    """Give `temp` the permission bits, owner and group of `original`.

    Raises PermissionError when they cannot be kept (another user's file,
    replaced by one who may not give files away): the agent that owns the
    session could no longer read or append to it.
    """
    os.chmod(temp, original.st_mode & 0o7777)
    mine = os.stat(temp)
    if (mine.st_uid, mine.st_gid) == (original.st_uid, original.st_gid):
        return
    try:
        os.chown(temp, original.st_uid, original.st_gid)
    except PermissionError:
        raise PermissionError(
            errno.EPERM,
            f"cannot keep the file's owner and group ({original.st_uid}:{original.st_gid}); "
            "replace it as its owner",
        ) from None
    os.chmod(temp, original.st_mode & 0o7777)  # chown clears set-id bits


def _check_not_written_meanwhile(
    path: Path,
    backup: Path,
    fenced: os.stat_result,
    written: os.stat_result,
    holders: list[tuple[int, str]],
) -> None:
    """Raise if the original (now `backup`) grew after the fence or is held open: put it back.

    An agent that opened the file just before the rename writes into the
    original, not the new file. The original then goes back to `path` when the
    new file is still as written (FileInUse when `holders`, the processes
    holding the original open for writing, are why; else FileChanged); else
    both stay and the message names them.
    """
    old = os.stat(backup)
    grew = (old.st_size, old.st_mtime_ns) != (fenced.st_size, fenced.st_mtime_ns)
    if not grew and not holders:
        return
    new = os.stat(path)
    if (new.st_ino, new.st_size, new.st_mtime_ns) == (
        written.st_ino,
        written.st_size,
        written.st_mtime_ns,
    ):
        os.replace(backup, path)
        _fsync_dir(path.parent)
        if not grew:
            who = ", ".join(f"process {pid} ({command})" for pid, command in holders)
            raise FileInUse(
                f"{path}: opened for writing by {who} while it was replaced, which would go on "
                "writing to the original; put back as it was, nothing was written (stop it "
                "first)"
            )
        raise FileChanged(
            f"{path}: written to while it was replaced ({fenced.st_size} → {old.st_size} "
            "bytes); put back as it is now, nothing was written"
        )
    raise FileChanged(
        f"{path}: written to while it was replaced, and written to again after: it holds the "
        f"repair and what was written after it; what was written during it is at the end of "
        f"{backup.name}"
    )


def write_file(path: Path, write: Callable[[BinaryIO], None], *, new: bool = False) -> None:
    """Write `path` whole or not at all: `write(f)` fills a temporary file that then replaces it.

    The temporary file sits beside `path` (named as `is_own_file` knows), so
    an interrupted or failed write leaves `path` as it was and no temporary
    file behind. A new file gets the permissions the umask gives; one that
    exists keeps its own. With `new`, `path` must not exist when the write
    ends (FileExistsError, and nothing replaced, if a file came there
    meanwhile). Raises OSError when the folder cannot be written. Not
    fsynced: it survives the process being killed, not the machine.
    """
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(temp, mode)
        if new:
            os.link(temp, path)  # refuses a file that is there: never replaces one
            os.unlink(temp)
        else:
            os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
