"""`pairfix` refusals: --out onto an input, devices, a full spool, --json documents, hints."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.cli.test_pairfix import BROKEN, HEALTHY, SAMPLES, run
from transcripts.engine import analyze

REPAIRED = analyze(BROKEN.read_bytes(), BROKEN.name).repaired


def test_fix_out_refuses_to_write_over_another_input_and_writes_nothing(tmp_path: Path) -> None:
    # `cd v && pairfix fix a.jsonl b/a.jsonl --out b`: a's repair would replace b/a.jsonl.
    (tmp_path / "b").mkdir()
    shutil.copyfile(BROKEN, tmp_path / "a.jsonl")
    shutil.copyfile(HEALTHY, tmp_path / "b" / "a.jsonl")
    a, b_a = tmp_path / "a.jsonl", tmp_path / "b" / "a.jsonl"
    status, out, err = run("fix", "--json", str(a), str(b_a), "--out", str(tmp_path / "b"))
    assert status == 2
    assert err.splitlines() == [
        f"{a}: --out would write its repair over {b_a}, an input of this run; not written",
        f"{b_a}: --out would write its repair over the file itself ({b_a}); not written",
    ]
    assert b_a.read_bytes() == HEALTHY.read_bytes() and a.read_bytes() == BROKEN.read_bytes()
    assert [(f["path"], f["error"]) for f in orjson.loads(out)["files"]] == [
        (str(a), f"--out would overwrite the input {b_a}"),
        (str(b_a), "--out would overwrite the input"),
    ]


def test_fix_out_refuses_both_inputs_whose_repairs_share_a_name(tmp_path: Path) -> None:
    first, second = tmp_path / "p" / "s.jsonl", tmp_path / "q" / "s.jsonl"
    for path in (first, second):
        path.parent.mkdir()
        shutil.copyfile(BROKEN, path)
    fixed = tmp_path / "fixed"
    status, _, err = run("fix", str(first), str(second), "--out", str(fixed))
    assert status == 2
    assert err.splitlines() == [
        f"{first}: --out would write its repair to {fixed / 's.jsonl'}, as it would the repair "
        f"of {second}; neither is written (name them in separate runs)",
        f"{second}: --out would write its repair to {fixed / 's.jsonl'}, as it would the repair "
        f"of {first}; neither is written (name them in separate runs)",
    ]
    assert list(fixed.iterdir()) == []


def test_a_walk_skips_the_out_folder_inside_it(tmp_path: Path) -> None:
    # `pairfix fix o3 --out o3/z` where o3/z/x.jsonl exists: not read as an input.
    o3 = tmp_path / "o3"
    (o3 / "z").mkdir(parents=True)
    shutil.copyfile(BROKEN, o3 / "x.jsonl")
    shutil.copyfile(HEALTHY, o3 / "z" / "x.jsonl")
    status, out, err = run("fix", "--json", str(o3), "--out", str(o3 / "z"))
    assert status == 0, err
    assert err == (
        f"{o3 / 'z'}: skipped: the --out folder (repairs go there, not read)\n"
        f"{o3 / 'x.jsonl'}: {o3 / 'z' / 'x.jsonl'} was there already and is replaced (no "
        "backup is kept in an --out folder)\n"
    )
    assert [f["path"] for f in orjson.loads(out)["files"]] == [str(o3 / "x.jsonl")]
    assert (o3 / "z" / "x.jsonl").read_bytes() == REPAIRED
    # Named as well, it is an input: then nothing is written over it.
    shutil.copyfile(HEALTHY, o3 / "z" / "x.jsonl")
    status, _, err = run("fix", str(o3), str(o3 / "z" / "x.jsonl"), "--out", str(o3 / "z"))
    assert status == 2
    assert f"over {o3 / 'z' / 'x.jsonl'}, an input of this run; not written" in err
    assert (o3 / "z" / "x.jsonl").read_bytes() == HEALTHY.read_bytes()


def test_fixing_a_folder_into_a_folder_inside_it_twice_nests_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "o"
    (folder / "project").mkdir(parents=True)
    shutil.copyfile(BROKEN, folder / "project" / "s.jsonl")
    for _ in range(2):
        status, _, err = run("fix", str(folder), "--out", str(folder / "fixed"))
        assert status == 0, err
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "fixed",
        "fixed/project",
        "fixed/project/s.jsonl",
        "project",
        "project/s.jsonl",
    ]
    assert (folder / "fixed" / "project" / "s.jsonl").read_bytes() == REPAIRED


def test_a_file_replaced_in_an_out_folder_is_named(tmp_path: Path) -> None:
    """An --out folder's file of the repair's name is replaced, and standard error says so."""
    out = tmp_path / "fixed"
    out.mkdir()
    (out / BROKEN.name).write_bytes(b"precious\n")
    status, _, err = run("fix", str(BROKEN), "--out", f"{out}/")
    assert status == 0, err
    assert (out / BROKEN.name).read_bytes() == REPAIRED
    assert (
        f"{BROKEN}: {out / BROKEN.name} was there already and is replaced (no backup is kept "
        "in an --out folder)"
    ) in err
    status, report, _ = run("fix", "--json", str(BROKEN), "--out", f"{out}/")
    assert orjson.loads(report)["files"][0]["replaced"] is True
    (out / BROKEN.name).unlink()
    status, report, err = run("fix", "--json", str(BROKEN), "--out", f"{out}/")
    assert "replaced" not in err and "replaced" not in orjson.loads(report)["files"][0]


def test_a_device_is_refused_unread(tmp_path: Path) -> None:
    status, out, err = run("check", "--json", "/dev/zero")
    assert status == 2
    assert err == (
        "/dev/zero: cannot read: a character device, not a session file (its bytes may never "
        "end); save the session to a file and name that\n"
    )
    # The report gives the reason too, as the line on standard error does.
    assert orjson.loads(out)["files"] == [{"path": "/dev/zero", "error": err[11:-1]}]
    assert err[11:].startswith("cannot read: a character device")
    # Standard input redirected from one is refused so too.
    with open("/dev/zero", "rb") as zero:
        status, _, err = run_with_stdin(zero, "fix", "-", "--out", str(tmp_path))
    assert status == 2 and err.startswith("<stdin>: cannot read: a character device")
    assert list(tmp_path.iterdir()) == []


def run_with_stdin(stdin: object, *argv: str) -> tuple[int, bytes, str]:
    import io

    from transcripts import cli

    out, err = io.BytesIO(), io.StringIO()
    status = cli.main(list(argv), stdin=stdin, stdout=out, stderr=err)  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def test_a_full_temporary_folder_is_named(tmp_path: Path) -> None:
    # A 64 KiB tmpfs as TMPDIR, mounted in a user namespace of its own (no root needed).
    script = Path(sys.executable).with_name("pairfix")
    shell = 'mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; TMPDIR="$1" exec "$2" check -'
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", shell, "sh"]
        + [str(tmp_path), str(script)],
        input=BROKEN.read_bytes() * 40,  # 243,000 bytes
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode == 99 or b"unshare" in done.stderr:
        pytest.skip(f"no tmpfs in a user namespace here: {done.stderr.decode()}")
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"<stdin>: cannot read: the temporary folder {tmp_path} is full (No space left on "
        "device); set TMPDIR to a folder with room\n",
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--out", "{tmp}/notes.txt/sub.jsonl", "f.jsonl"],
            "--out {tmp}/notes.txt/sub.jsonl: {tmp}/notes.txt is not a folder (a file is "
            "there), so nothing can be written under it",
        ),
        (
            ["--out", "{tmp}/notes.txt", "f.jsonl"],
            "--out {tmp}/notes.txt exists and is not a folder: name a folder, or a new file "
            "ending .jsonl or .json (- for standard output)",
        ),
        (
            ["--out", "{tmp}/one.jsonl", "{tmp}", "f.jsonl"],
            "--out {tmp}/one.jsonl names one file (it ends .jsonl), and more than one session "
            "file was given: name a folder for several",
        ),
        (
            ["--out", "/proc/x", "f.jsonl"],
            "--out /proc/x: cannot create: {proc}",
        ),
        (["f.jsonl"], "fix needs --out DIR or --in-place (or --dry-run, which writes nothing)"),
        (["--out", "-", "f.jsonl"], "--json and --out - both write to standard output; choose one"),
    ],
)
def test_fix_json_prints_a_document_for_every_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(BROKEN, tmp_path / "f.jsonl")
    (tmp_path / "notes.txt").write_bytes(b"mine\n")
    given = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    status, out, err = run("fix", "--json", *given)
    error = error.replace("{tmp}", str(tmp_path)).replace("{proc}", mkdir_refusal("/proc/x"))
    assert (status, err) == (2, error + "\n")
    assert orjson.loads(out) == {"policy": "synthesize", "status": 2, "error": error, "files": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl", "notes.txt"]


def test_json_refusals_of_missing_and_empty_inputs(tmp_path: Path) -> None:
    status, out, _ = run("preview", "--json", str(tmp_path / "missing.jsonl"))
    assert status == 2
    assert orjson.loads(out) == {
        "path": str(tmp_path / "missing.jsonl"),
        "status": 2,
        "error": "cannot read: No such file or directory",
    }
    status, out, _ = run("preview", "--json", str(tmp_path))
    assert (status, orjson.loads(out)["error"]) == (2, "no session files found")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    status, out, _ = run("preview", "--json", str(bad))
    assert status == 2
    assert orjson.loads(out) == {
        "path": str(bad),
        "status": 2,
        "error": "unreadable: line 1: not JSON or JSON lines: column 1: invalid "
        "literal, expected 'null'",
    }
    bad.unlink()
    status, out, _ = run("check", "--json", str(tmp_path))
    assert orjson.loads(out) == {
        "policy": "synthesize",
        "status": 2,
        "error": f"{tmp_path}: no session files found",
        "files": [],
    }
    status, out, _ = run("fix", "--json", "--out", "-", str(BROKEN), str(HEALTHY))
    assert orjson.loads(out)["error"] == "--out - takes exactly one input file"


def test_json_is_kept_for_a_command_line_argparse_refuses() -> None:
    status, out, err = run("check", "--json")
    assert status == 2
    assert err.endswith("pairfix check: error: the following arguments are required: PATH\n")
    assert orjson.loads(out) == {
        "status": 2,
        "error": "the following arguments are required: PATH",
        "files": [],
    }
    status, out, err = run("fix", "--js", "--policy", "nope", str(BROKEN))
    assert (status, orjson.loads(out)["error"]) == (2, err.splitlines()[-1].split("error: ")[1])
    assert run("check", str(BROKEN), "--policy", "nope")[1] == b""  # no --json: no document


def test_an_out_folder_that_cannot_be_made_is_named_escaped(tmp_path: Path) -> None:
    for name, shown, exact in [
        ("/proc/\x1b]0;owned\x07x", "/proc/\\x1b]0;owned\\x07x", "/proc/\x1b]0;owned\x07x"),
        (os.fsdecode(b"/proc/\xff"), "/proc/\\xff", "/proc/\\xff"),
    ]:
        status, out, err = run("fix", "--json", str(BROKEN), "--out", name)
        assert status == 2
        reason = mkdir_refusal(name)
        assert err == f"--out {shown}: cannot create: {reason}\n"
        # --json keeps the value exact (JSON escapes the controls itself).
        assert orjson.loads(out)["error"] == f"--out {exact}: cannot create: {reason}"


def test_a_hint_for_a_name_a_terminal_would_act_on_is_spelled_so_a_shell_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A newline and an escape in the name: printed as they are, they would act on the
    # terminal; spelled `\x0a` in plain quotes, the pasted command names another file.
    monkeypatch.chdir(tmp_path)
    for raw in (b"evil\n\x1b[31mRED 'q'.jsonl", b"caf\xff.jsonl", b"-\xe2\x80\xaex.jsonl"):
        name = os.fsdecode(raw)
        (tmp_path / name).write_bytes(BROKEN.read_bytes())
        status, out, _ = run("check", "--", name)
        assert status == 1
        text = out.decode()
        word = text.split("`pairfix preview ", 1)[1].split("` shows what it sends", 1)[0]
        assert word.isprintable() and "$'" in word
        word = word.removeprefix("-- ")  # an option's `-` guarded
        echoed = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], capture_output=True, check=True, timeout=30
        ).stdout
        assert echoed == raw


def mkdir_refusal(path: str) -> str:
    """Return why the kernel refuses to make `path` (a root user and others hear different)."""
    with pytest.raises(OSError) as refused:
        os.mkdir(path)
    return str(refused.value.strerror)


def test_the_resume_hint_is_a_command_that_runs_when_pasted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, command in [
        ("s p.jsonl", "pairfix preview 's p.jsonl'"),
        ("-x.jsonl", "pairfix preview -- -x.jsonl"),
    ]:
        shutil.copyfile(BROKEN, tmp_path / name)
        status, out, _ = run("check", "--", name)
        assert status == 1
        assert f"; `{command}` shows what it sends\n" in out.decode()
        status, out, _ = run(*shlex.split(command)[1:])
        assert status == 0 and out.decode().startswith(f"{name}: Claude Code resumes it with ")


def test_the_hard_link_note_quotes_its_find_command(tmp_path: Path) -> None:
    folder = tmp_path / "my sessions"
    folder.mkdir()
    path = folder / "s.jsonl"
    shutil.copyfile(BROKEN, path)
    os.link(path, folder / "copy.jsonl")
    status, out, err = run("fix", "--in-place", "--json", str(path))
    assert status == 0
    backup = orjson.loads(out)["files"][0]["backup"]
    command = err.split("`")[1]
    words = shlex.split(command)
    assert (words[0], words[2:]) == ("find", ["-xdev", "-samefile", backup])
    assert Path(words[1]).is_dir()


@pytest.mark.parametrize("format", ["claude_code", "openclaw", "codex"])
def test_a_json_lines_format_forced_on_a_json_document_is_refused_and_writes_nothing(
    tmp_path: Path, format: str
) -> None:
    # A pretty-printed document read as JSON lines is all malformed lines: under `discard`
    # a repair would drop every one of them and write an empty file.
    document = tmp_path / "chat.json"
    shutil.copyfile(SAMPLES / "formats" / "openai_chat.json", document)
    original = document.read_bytes()

    status, _, err = run(
        "fix", "--in-place", "--grace", "0", "--format", format, "--policy", "discard",
        str(document),
    )  # fmt: skip

    assert status == 2
    assert "is JSON lines, and none of the first" in err and "is a JSON object" in err
    assert document.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["chat.json"]
