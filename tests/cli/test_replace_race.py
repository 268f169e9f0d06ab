"""`replace_file` against an agent that appends in the moment of the rename, and owners kept."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from transcripts import replace
from transcripts.replace import BACKUP_MARK, FileChanged, replace_file

NOW = datetime(2026, 12, 1, tzinfo=UTC)
LINE = b'{"type":"user","message":{"role":"user","content":"agent append"}}\n'


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"user"}\n')
    return path


def _backups(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if BACKUP_MARK in p.name)


def _append_before(monkeypatch: pytest.MonkeyPatch, name: str, path: Path) -> None:
    """Append LINE to `path` (the original inode) just before `os.<name>` runs, once."""
    real = getattr(os, name)

    def appending(*args: object, **kwargs: object) -> object:
        monkeypatch.setattr(replace.os, name, real)
        with open(path, "ab") as f:  # as Claude Code appends: open, write, close
            f.write(LINE)
        return real(*args, **kwargs)

    monkeypatch.setattr(replace.os, name, appending)


@pytest.mark.parametrize("moment", ["link", "replace"])
def test_an_append_in_the_moment_of_the_rename_is_put_back_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    path = _session(tmp_path)
    _append_before(monkeypatch, moment, path)
    with pytest.raises(FileChanged, match="written to while it was replaced.*put back"):
        replace_file(path, lambda f: f.write(b"repaired\n"), lambda: None, now=NOW)
    assert path.read_bytes() == b'{"type":"user"}\n' + LINE
    assert _backups(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_when_both_files_were_written_neither_write_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _session(tmp_path)
    _append_before(monkeypatch, "replace", path)
    real_stat = os.stat
    done: list[bool] = []

    def stat_then_append(target: object, *args: object, **kwargs: object) -> os.stat_result:
        # Once renamed (the backup is there), the agent appends to the new file as well.
        if Path(str(target)) == path and _backups(tmp_path) and not done:
            done.append(True)
            with open(path, "ab") as f:
                f.write(b"after\n")
        return real_stat(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replace.os, "stat", stat_then_append)
    with pytest.raises(FileChanged, match="written to again after") as caught:
        replace_file(path, lambda f: f.write(b"repaired\n"), lambda: None, now=NOW)
    (backup,) = _backups(tmp_path)
    assert backup in str(caught.value)
    assert path.read_bytes() == b"repaired\nafter\n"
    assert (tmp_path / backup).read_bytes() == b'{"type":"user"}\n' + LINE


def test_a_quiet_replacement_keeps_mode_owner_and_group(tmp_path: Path) -> None:
    path = _session(tmp_path)
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)  # nobody: a file of another user, replaced by root
    before = os.stat(path)
    backup = replace_file(path, lambda f: f.write(b"repaired\n"), lambda: None, now=NOW)
    after = os.stat(path)
    assert path.read_bytes() == b"repaired\n"
    assert backup.read_bytes() == b'{"type":"user"}\n'
    assert (after.st_mode & 0o7777, after.st_uid, after.st_gid) == (
        0o640,
        before.st_uid,
        before.st_gid,
    )


def test_an_owner_that_cannot_be_kept_refuses_the_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _session(tmp_path)
    real_stat = os.stat

    def foreign(target: object, *args: object, **kwargs: object) -> os.stat_result:
        st = real_stat(target, *args, **kwargs)  # type: ignore[arg-type]
        if Path(str(target)) == path:
            fields = list(st)
            fields[4] = st.st_uid + 1  # st_uid: another user's file
            return os.stat_result(fields)
        return st

    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(replace.os, "stat", foreign)
    monkeypatch.setattr(replace.os, "chown", refuse)
    with pytest.raises(PermissionError, match="cannot keep the file's owner"):
        replace_file(path, lambda f: f.write(b"repaired\n"), lambda: None, now=NOW)
    assert path.read_bytes() == b'{"type":"user"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_an_append_just_after_the_fence_is_put_back_not_lost(tmp_path: Path) -> None:
    path = _session(tmp_path)

    def fence_then_append() -> None:
        # The fence finds the file as read; the agent appends the moment it is done.
        with open(path, "ab") as f:
            f.write(LINE)

    with pytest.raises(FileChanged, match="put back"):
        replace_file(path, lambda f: f.write(b"repaired\n"), fence_then_append, now=NOW)
    assert path.read_bytes() == b'{"type":"user"}\n' + LINE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_a_new_file_is_never_written_over_one_made_meanwhile(tmp_path: Path) -> None:
    target = tmp_path / "new.jsonl"

    def write(f: object) -> None:
        target.write_bytes(b"another program's file\n")  # made while the repair is written
        f.write(b"repaired\n")  # type: ignore[attr-defined]

    with pytest.raises(FileExistsError):
        replace.write_file(target, write, new=True)
    assert target.read_bytes() == b"another program's file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl"]
    replace.write_file(tmp_path / "fresh.jsonl", lambda f: f.write(b"repaired\n"), new=True)
    assert (tmp_path / "fresh.jsonl").read_bytes() == b"repaired\n"


def test_an_agent_that_opens_the_file_during_the_fence_keeps_writing_to_the_session(
    tmp_path: Path,
) -> None:
    # The writers are looked for before the fence hashes the file (seconds, for a long
    # session): an agent that opens it then, and writes only after the rename, would
    # write into the backup. The attacker's run lost such a record with exit 0.
    import subprocess
    import sys

    path = _session(tmp_path)
    agent_code = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        "print('open', flush=True)\n"
        "sys.stdin.readline()\n"
        f"os.write(fd, {LINE!r})\n"
    )
    agents: list[subprocess.Popen[str]] = []

    def fence() -> None:  # the agent opens the file while the fence looks at it
        agent = subprocess.Popen(
            [sys.executable, "-c", agent_code, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        agents.append(agent)
        assert agent.stdout is not None and agent.stdout.readline() == "open\n"

    try:
        with pytest.raises(replace.FileInUse, match=r"opened for writing by process \d+ "):
            replace_file(path, lambda f: f.write(b"repaired\n"), fence, now=NOW)
        # Put back: the agent's handle is on the session file again.
        assert _backups(tmp_path) == []
        assert agents[0].stdin is not None
        agents[0].stdin.write("go\n")
        agents[0].stdin.close()
        assert agents[0].wait(timeout=30) == 0
        assert path.read_bytes() == b'{"type":"user"}\n' + LINE
    finally:
        for agent in agents:
            agent.kill()
            agent.wait(timeout=30)
            for pipe in (agent.stdin, agent.stdout):
                if pipe is not None:
                    pipe.close()
