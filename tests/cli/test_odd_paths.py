"""`pairfix` on paths that are no regular file: pipes, FIFOs, sockets, hard links, odd --out."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from tests.cli.test_pairfix import BROKEN, HEALTHY, leftovers, run
from transcripts.engine import analyze
from transcripts.replace import BACKUP_MARK, is_own_file
from transcripts.sizes import binary_size

REPAIRED = analyze(BROKEN.read_bytes(), BROKEN.name).repaired


@contextmanager
def pipe_of(data: bytes) -> Iterator[tuple[str, int]]:
    """Yield `/dev/fd/N` of a pipe holding `data` (its writer closed), as `<(cat FILE)` gives."""
    assert len(data) < 65536  # the pipe's buffer holds it whole: no writer thread needed
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    try:
        yield f"/dev/fd/{read_end}", read_end
    finally:
        os.close(read_end)


@contextmanager
def fifo_written(path: Path, data: bytes) -> Iterator[None]:
    """Make the named FIFO `path`, and write `data` into it once a reader opens it."""
    os.mkfifo(path)

    def write() -> None:
        with open(path, "wb") as f:  # waits for the reader
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield
    finally:
        if writer.is_alive():  # never read: open it so the writer ends
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(5)


def test_check_reads_a_pipe_named_as_a_path() -> None:
    with pipe_of(BROKEN.read_bytes()) as (path, _):
        status, out, err = run("check", path)
    assert status == 1, err
    text = out.decode()
    assert text.startswith(f"{path}: claude_code, faults: missing_result=1")
    assert "Illegal seek" not in err
    # Its bytes came once: the hint names no command that would read them again, nor
    # one that cannot run (`pairfix preview` with no path is a usage error).
    assert f"`pairfix preview {path}`" not in text
    assert "`pairfix preview`" not in text
    assert (
        "; save these bytes to a file and `pairfix preview FILE` shows what it sends "
        f"({path} is not a regular file: it was read once, as a stream)\n"
    ) in text


def test_the_shell_gives_a_process_substitution_and_a_piped_dev_stdin() -> None:
    script = Path(sys.executable).with_name("pairfix")
    done = subprocess.run(
        ["bash", "-c", f'cat "{HEALTHY}" | "{script}" check <(cat "{BROKEN}") /dev/stdin'],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, b"")
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("/dev/fd/") and "faults: missing_result=1" in lines[0]
    assert lines[-1] == "/dev/stdin: claude_code, faults: none; ops: none"


def test_a_named_fifo_is_read_as_a_stream_and_fixed_into_a_folder(tmp_path: Path) -> None:
    fifo = tmp_path / "live.jsonl"
    with fifo_written(fifo, BROKEN.read_bytes()):
        status, out, err = run("fix", str(fifo), "--out", str(tmp_path / "fixed"))
    assert status == 0, err
    assert (tmp_path / "fixed" / "live.jsonl").read_bytes() == REPAIRED
    assert out.decode().endswith(f"-> {tmp_path / 'fixed' / 'live.jsonl'}\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_fix_in_place_refuses_a_pipe_and_reads_none_of_it(tmp_path: Path) -> None:
    with pipe_of(BROKEN.read_bytes()) as (path, read_end):
        status, out, err = run("fix", "--in-place", "--json", path)
        assert os.read(read_end, 65536) == BROKEN.read_bytes()  # still all there
    assert status == 2
    assert err == (
        f"{path}: not a regular file (a pipe, a FIFO or a device): it cannot be replaced in "
        "place; use --out DIR\n"
    )
    assert orjson.loads(out)["files"] == [{"path": path, "error": "not a regular file"}]


def test_a_folder_walk_skips_pipes_sockets_and_devices_unopened(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copyfile(BROKEN, folder / "s1.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(folder / "agent.jsonl"))
    (folder / "null.jsonl").symlink_to(os.devnull)
    (folder / "gone.jsonl").symlink_to(folder / "nowhere.jsonl")
    # Held open both ways, so a wrong open of the FIFO fails (ESPIPE) rather than waits.
    held = os.open(folder / "pipe.jsonl", os.O_RDWR | os.O_NONBLOCK)
    try:
        status, out, err = run("check", "--json", str(folder))
    finally:
        os.close(held)
        listening.close()
    assert status == 1, err
    assert [f["path"] for f in orjson.loads(out)["files"]] == [str(folder / "s1.jsonl")]
    assert err.splitlines() == [
        f"{folder / 'agent.jsonl'}: skipped: a socket, not a regular file",
        f"{folder / 'gone.jsonl'}: skipped: a symbolic link that leads nowhere, not a regular file",
        f"{folder / 'null.jsonl'}: skipped: a device, not a regular file",
        f"{folder / 'pipe.jsonl'}: skipped: a named pipe, not a regular file",
    ]


def test_a_walk_skips_pairfixs_own_backups_but_not_a_name_like_one(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copyfile(BROKEN, folder / "s.jsonl")
    assert run("fix", "--in-place", str(folder / "s.jsonl"))[0] == 0
    [backup] = leftovers(folder)
    assert backup.startswith(f"s.jsonl{BACKUP_MARK}")
    shutil.copyfile(BROKEN, folder / "notes.pairfix-backup-ideas.jsonl")
    status, out, err = run("check", "--json", str(folder))
    assert status == 1, err
    assert [(Path(f["path"]).name, len(f["faults"])) for f in orjson.loads(out)["files"]] == [
        ("notes.pairfix-backup-ideas.jsonl", 1),
        ("s.jsonl", 0),
    ]
    # What a sync skips too: only the names a replacement makes.
    assert is_own_file(backup) and is_own_file(".pairfix-tmp-k2_9xq0a")
    assert not is_own_file("notes.pairfix-backup-ideas.jsonl")
    assert not is_own_file(".pairfix-tmp-notes.jsonl")


def test_fix_out_under_a_regular_file_says_its_folder_is_no_folder(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"mine\n")
    for out in (notes / "fixed.jsonl", notes / "deeper" / "fixed.jsonl", notes / "dir"):
        status, _, err = run("fix", str(BROKEN), "--out", str(out))
        assert status == 2
        assert err == (
            f"--out {out}: {notes} is not a folder (a file is there), so nothing can be "
            "written under it\n"
        )
    assert notes.read_bytes() == b"mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_fix_out_folder_whose_subfolder_is_a_file_names_it(tmp_path: Path) -> None:
    (tmp_path / "in" / "project").mkdir(parents=True)
    shutil.copyfile(BROKEN, tmp_path / "in" / "project" / "s.jsonl")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "project").write_bytes(b"mine\n")
    status, _, err = run("fix", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert status == 2
    assert err == (
        f"{tmp_path / 'in' / 'project' / 's.jsonl'}: cannot write "
        f"{tmp_path / 'out' / 'project' / 's.jsonl'}: {tmp_path / 'out' / 'project'} is not a "
        "folder\n"
    )
    assert (tmp_path / "out" / "project").read_bytes() == b"mine\n"


def test_the_resume_hint_for_standard_input_names_standard_input() -> None:
    status, out, _ = run("check", "-", stdin=BROKEN.read_bytes())
    assert status == 1
    text = out.decode()
    assert "pairfix preview <stdin>" not in text
    assert "`pairfix preview -` shows what it sends, given the same standard input" in text
    # And that command works so.
    status, out, _ = run("preview", "-", stdin=BROKEN.read_bytes())
    assert status == 0 and out.decode().startswith("<stdin>: Claude Code resumes it with ")


def test_fix_in_place_of_a_file_with_other_hard_links_says_they_keep_the_old_bytes(
    tmp_path: Path,
) -> None:
    path, other = tmp_path / "s.jsonl", tmp_path / "snapshot" / "s.jsonl"
    other.parent.mkdir()
    shutil.copyfile(BROKEN, path)
    os.link(path, other)
    status, out, err = run("fix", "--in-place", "--json", str(path))
    assert status == 0
    [entry] = orjson.loads(out)["files"]
    assert path.read_bytes() == REPAIRED
    assert other.read_bytes() == BROKEN.read_bytes()  # the other name: as it was
    backup = Path(entry["backup"])
    assert (entry["other_links"], os.path.samefile(backup, other)) == (1, True)
    assert err.startswith(
        f"{path}: had 1 other hard link: only this name was repaired, the other names still "
        f"hold the bytes as they were (they are the backup's: `find "
    )
    assert err.endswith(f" -xdev -samefile {backup}` lists them)\n")
    # A file with no other name gets no such note.
    single = tmp_path / "single.jsonl"
    shutil.copyfile(BROKEN, single)
    status, _, err = run("fix", "--in-place", str(single))
    assert (status, err) == (0, "")


def test_a_dry_run_too_large_to_diff_gives_sizes_in_the_units_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from transcripts import cli

    # The limit is 32 MiB (33,554,432 bytes), as README says: once printed "34 MB".
    assert cli.DIFF_BYTES == 32 * 1024 * 1024 and binary_size(cli.DIFF_BYTES) == "32.0 MiB"
    monkeypatch.setattr(cli, "DIFF_BYTES", 4096)
    status, out, _ = run("fix", "--dry-run", str(BROKEN))
    assert status == 1
    assert f"  (no diff: {BROKEN} is 5.9 KiB, over 4.0 KiB)\n" in out.decode()  # 6,075 bytes


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1, "1.0 MiB"),  # rounds up into the next unit, not "1024.0 KiB"
        (50 * 1024 * 1024, "50.0 MiB"),
        (1_000_000_000, "953.7 MiB"),
        (1 << 30, "1.0 GiB"),
        (5 << 40, "5.0 TiB"),
        (5 << 50, "5120.0 TiB"),
    ],
)
def test_binary_size_labels_binary_units_as_binary(n: int, shown: str) -> None:
    assert binary_size(n) == shown


def test_a_walk_skips_the_backup_of_a_file_whose_name_holds_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "two\nlines.jsonl"
    shutil.copyfile(BROKEN, path)
    assert run("fix", "--in-place", str(path))[0] == 0
    [backup] = leftovers(tmp_path)
    assert backup.startswith(f"two\nlines.jsonl{BACKUP_MARK}") and is_own_file(backup)
    status, out, err = run("check", "--json", str(tmp_path))
    assert (status, err) == (0, "")
    assert [f["path"] for f in orjson.loads(out)["files"]] == [str(path)]
