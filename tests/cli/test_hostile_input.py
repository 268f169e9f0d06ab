"""`pairfix` against hostile input: symlinks in place, terminal escapes, non-UTF-8 file names."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import orjson
import pytest

from tests.cli.test_pairfix import BROKEN, HEALTHY, leftovers, run
from transcripts.engine import analyze
from transcripts.replace import BACKUP_MARK
from transcripts.visible import terminal_text

# A tool call id that clears the screen, retitles the window, rings the bell, breaks the
# line and reverses what follows, as the JSON of a session file spells it.
EVIL_ID_JSON = rb"toolu_\u001b[2J\u001b]0;pwned\u0007\u009b31m\u007f\n\u202eX"
EVIL_ID_SHOWN = r"toolu_\x1b[2J\x1b]0;pwned\x07\x9b31m\x7f\x0a[U+202E]X"
ORPHANED_ID = b"toolu_01CCCCCCCCCCCCCCCCCCCCCC"  # the call BROKEN leaves unanswered


def evil_session(path: Path) -> Path:
    raw = BROKEN.read_bytes()
    assert ORPHANED_ID in raw
    path.write_bytes(raw.replace(ORPHANED_ID, EVIL_ID_JSON))
    return path


def assert_inert(text: str) -> None:
    """Nothing in `text` but printable characters and the newlines that end its lines."""
    for line in text.split("\n"):
        assert line.isprintable(), repr(line)


def test_fix_in_place_refuses_a_symlink_and_still_repairs_the_other_files(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real.jsonl"
    shutil.copyfile(BROKEN, real)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    other = tmp_path / "other.jsonl"
    shutil.copyfile(BROKEN, other)
    status, out, err = run("fix", "--in-place", "--json", str(link), str(other))
    assert status == 2
    assert f"{link}: is a symbolic link; not repaired in place" in err
    assert f"(repair its target instead: {os.path.realpath(real)})" in err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == BROKEN.read_bytes()
    assert other.read_bytes() == analyze(BROKEN.read_bytes(), other.name).repaired
    files = orjson.loads(out)["files"]
    assert files[0] == {"path": str(link), "error": "symbolic link"}
    assert files[1]["written"] == str(other)
    [backup] = leftovers(tmp_path)
    assert backup.startswith(f"other.jsonl{BACKUP_MARK}")


def test_fix_in_place_skips_a_symlink_found_in_a_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = elsewhere / "real.jsonl"
    shutil.copyfile(BROKEN, real)
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "link.jsonl").symlink_to(real)
    shutil.copyfile(BROKEN, folder / "s.jsonl")
    status, out, err = run("fix", "--in-place", str(folder))
    assert status == 0, err
    assert f"{folder / 'link.jsonl'}: symbolic link; skipped" in err
    assert (folder / "link.jsonl").is_symlink()
    assert real.read_bytes() == BROKEN.read_bytes()
    assert (folder / "s.jsonl").read_bytes() == analyze(BROKEN.read_bytes(), "s.jsonl").repaired
    [backup] = leftovers(folder)
    assert backup.startswith(f"s.jsonl{BACKUP_MARK}")
    # Reading through a link is harmless: check still follows it.
    assert run("check", str(folder))[0] == 1


def test_terminal_escapes_in_a_tool_call_id_are_spelled_out(tmp_path: Path) -> None:
    path = evil_session(tmp_path / "s.jsonl")
    for argv in (
        ("check", str(path)),
        ("fix", "--dry-run", "--out", str(tmp_path / "out"), str(path)),
        ("fix", "--out", str(tmp_path / "out"), str(path)),
        ("preview", str(path)),
    ):
        status, out, err = run(*argv)
        assert status in (0, 1), (argv, err)
        text = out.decode() + err
        assert_inert(text)
        assert "\x1b" not in text and "\u202e" not in text
        if argv[0] != "fix" or "--dry-run" in argv:
            assert EVIL_ID_SHOWN in text, (argv, text)


def test_json_output_keeps_the_tool_call_id_exactly(tmp_path: Path) -> None:
    path = evil_session(tmp_path / "s.jsonl")
    status, out, _ = run("check", "--json", str(path))
    assert status == 1
    [entry] = json.loads(out)["files"]
    ids = {f["tool_call_id"] for f in entry["faults"]}
    assert "toolu_\x1b[2J\x1b]0;pwned\x07\x9b31m\x7f\n\u202eX" in ids
    assert b"\x1b" not in out  # escaped as \u001b by the JSON encoder


def test_terminal_text_spells_controls_format_characters_and_file_name_bytes() -> None:
    assert terminal_text("a\x00\t\n\r\x1b\x7f\x85\x9fz") == r"a\x00\x09\x0a\x0d\x1b\x7f\x85\x9fz"
    assert terminal_text("gnp\u202e.exe\u200b\u2028\ufeff") == (
        "gnp[U+202E].exe[U+200B][U+2028][U+FEFF]"
    )
    assert terminal_text(os.fsdecode(b"a\xff.jsonl")) == r"a\xff.jsonl"
    assert terminal_text("naïve 日本 \\x1b") == "naïve 日本 \\x1b"
    shown = terminal_text("\x1b\u202e")
    assert terminal_text(shown) == shown


@pytest.fixture
def odd_folder(tmp_path: Path) -> Path:
    """A folder whose first session's name is not UTF-8 (byte 0xff), then two plain ones."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    try:
        (folder / os.fsdecode(b"a\xff.jsonl")).write_bytes(BROKEN.read_bytes())
    except (OSError, UnicodeError):  # pragma: no cover - a file system that refuses the name
        pytest.skip("this file system refuses non-UTF-8 names")
    shutil.copyfile(BROKEN, folder / "b.jsonl")
    shutil.copyfile(HEALTHY, folder / "c.jsonl")
    return folder


def test_a_non_utf8_file_name_is_shown_escaped_and_the_rest_processed(odd_folder: Path) -> None:
    shown = f"{odd_folder}/a\\xff.jsonl"
    status, out, err = run("check", str(odd_folder))
    assert status == 1, err
    lines = out.decode().splitlines()
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == [
        shown,
        f"{odd_folder}/b.jsonl",
        f"{odd_folder}/c.jsonl",
    ]
    status, out, err = run("fix", "--in-place", str(odd_folder))
    assert status == 0, err
    assert out.decode().startswith(f"{shown}: claude_code, faults: missing_result=1")
    repaired = analyze(BROKEN.read_bytes(), "b.jsonl").repaired
    assert (odd_folder / os.fsdecode(b"a\xff.jsonl")).read_bytes() == repaired
    assert (odd_folder / "b.jsonl").read_bytes() == repaired
    assert out.decode().endswith(
        f"{odd_folder}/c.jsonl: claude_code, faults: none; ops: none; left as it was\n"
    )


def test_json_reports_a_non_utf8_file_name_escaped(odd_folder: Path) -> None:
    status, out, err = run("check", "--json", str(odd_folder))
    assert status == 1, err
    files = json.loads(out)["files"]
    assert [f["path"] for f in files] == [
        f"{odd_folder}/a\\xff.jsonl",
        f"{odd_folder}/b.jsonl",
        f"{odd_folder}/c.jsonl",
    ]
    status, out, err = run("fix", "--in-place", "--json", str(odd_folder))
    assert status == 0, err
    first = json.loads(out)["files"][0]
    assert first["written"] == f"{odd_folder}/a\\xff.jsonl"
    assert first["backup"].startswith(f"{odd_folder}/a\\xff.jsonl{BACKUP_MARK}")


def test_escapes_in_a_file_name_are_spelled_out(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copyfile(BROKEN, folder / "x\x1b]0;pwned\x07\u202egnp.jsonl")
    status, out, err = run("fix", "--dry-run", "--in-place", str(folder))
    assert status == 1, err
    text = out.decode() + err
    assert_inert(text)
    assert text.startswith(rf"{folder}/x\x1b]0;pwned\x07[U+202E]gnp.jsonl: claude_code, faults:")
