"""`pairfix`: exit codes, reports, --out, --in-place and its fence, folders, stdin, --dry-run."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.helpers import held_open
from transcripts import cli
from transcripts.engine import analyze
from transcripts.replace import BACKUP_MARK, TEMP_PREFIX

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "demo" / "samples"
CASES = SAMPLES / "cases"
BROKEN = SAMPLES / "formats" / "claude_code.jsonl"  # one call orphaned by an interruption
HEALTHY = CASES / "02_cc-parallel-results-split-lines.jsonl"  # a valid guard case


def run(*argv: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
    """Return (exit status, stdout bytes, stderr text) of `pairfix argv` run in this process."""
    out, err = io.BytesIO(), io.StringIO()
    status = cli.main(list(argv), stdin=io.BytesIO(stdin), stdout=out, stderr=err)  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if BACKUP_MARK in p.name or TEMP_PREFIX in p.name
    )


def test_check_exits_0_for_a_healthy_session() -> None:
    status, out, err = run("check", str(HEALTHY))
    assert status == 0, err
    assert out.decode().startswith(f"{HEALTHY}: claude_code, faults: none")


def test_check_exits_1_and_names_each_fault_with_the_providers_error() -> None:
    status, out, _ = run("check", str(CASES / "01_cc-compaction-orphan-result.jsonl"))
    assert status == 1
    text = out.decode()
    assert "orphaned_result toolu_syn_out_02 at record 9" in text
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_syn_out_02" in text
    # The error is a request sent as the file is: the agent's own resume drops the
    # orphaned result, and the line says so (a trial read "rejected" beside "accepted").
    assert (
        "  resumed as it is, Claude Code mends or drops these itself (as "
        "@anthropic-ai/claude-code 2.1.328 does; other versions may not) and anthropic accepts "
        "its request; this file was written by Claude Code 2.0.14, which may send it as it is "
        "and get the error above: `pairfix fix` makes it valid for any version; "
        f"`pairfix preview {CASES / '01_cc-compaction-orphan-result.jsonl'}` shows what it sends"
    ) in text
    # Gemini CLI has no such recovery: the line says its request is still refused.
    status, out, _ = run("check", str(SAMPLES / "formats" / "gemini_cli_session.jsonl"))
    assert (
        "  resumed as it is, Gemini CLI (as @google/gemini-cli 0.61.0 does; other versions may "
        "not) still sends a request gemini refuses ("
    ) in out.decode()
    # An unanswered call Claude Code drops itself on resume: its request is accepted.
    status, out, _ = run("check", "--json", "--grace", "0", str(BROKEN))
    assert status == 1
    [entry] = orjson.loads(out)["files"]
    assert entry["resume"] == {
        "agent": "Claude Code",
        "modelled_on": "@anthropic-ai/claude-code 2.1.328",
        "written_by": "2.0.50",
        "provider": "anthropic",
        "accepted": True,
        "error": "",
    }
    status, out, _ = run("check", str(CASES / "11_openai-chat-trim-orphan-tool.json"))
    assert status == 1 and "pairfix preview" not in out.decode()  # no agent writes that file


def test_check_says_what_fix_leaves_when_its_policy_keeps_a_fault(tmp_path: Path) -> None:
    """A line no reader can parse is kept by the default policy: fix does not make it valid."""
    lines = (CASES / "01_cc-compaction-orphan-result.jsonl").read_bytes().splitlines(True)
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b"".join([*lines[:3], b'{"type":"user","message":\n', *lines[3:]]))
    status, out, _ = run("check", str(path))
    text = out.decode()
    assert status == 1 and "malformed_record" in text
    assert "makes it valid for any version" not in text
    assert (
        "and get the error above: `pairfix fix` leaves malformed_record as its policy says ("
    ) in text
    assert "`--policy discard` drops such lines)" in text


def test_check_exits_2_when_any_file_is_unreadable_or_missing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json at all\n")
    status, out, err = run("check", str(BROKEN), str(bad))
    assert status == 2
    assert f"{bad}: unreadable: line 1: not JSON or JSON lines" in err
    assert "missing_result" in out.decode()  # the readable file is still reported
    status, _, err = run("check", str(tmp_path / "absent.jsonl"))
    assert (status, err) == (
        2,
        f"{tmp_path / 'absent.jsonl'}: cannot read: No such file or directory\n",
    )


FAULTY_CASES = sorted(
    p.name
    for p in CASES.iterdir()
    if p.suffix in (".json", ".jsonl")
    and not p.name.endswith(".expect.json")
    and orjson.loads(p.with_suffix(".expect.json").read_bytes())["faults"]
)


@pytest.mark.parametrize("case", FAULTY_CASES)
def test_json_report_counts_records_as_the_cases_do(case: str) -> None:
    expect = orjson.loads((CASES / case).with_suffix(".expect.json").read_bytes())
    status, out, _ = run("check", "--json", str(CASES / case))
    document = orjson.loads(out)
    assert (status, document["status"], document["policy"]) == (1, 1, "synthesize")
    [entry] = document["files"]
    assert (entry["path"], entry["error"]) == (str(CASES / case), None)
    reported = {(f["kind"], f["tool_call_id"]): f for f in entry["faults"]}
    for fault in expect["faults"]:
        kinds = [fault["kind"], *fault.get("also_acceptable_kinds", [])]
        found = [
            reported[(k, fault["tool_call_id"])]
            for k in kinds
            if (k, fault["tool_call_id"]) in reported
        ]
        assert found, (fault, entry["faults"])
        assert found[0]["record"] == fault["message_index"]
        if "block_index" in fault:
            assert found[0]["block"] == fault["block_index"]
    if expect["expected_provider_error"]:
        assert any(f["error"] for f in entry["faults"])  # worded as the provider words it
    for op in entry["ops"]:
        mended = entry["faults"][op["fault_index"]]
        assert (op["fault"], op["tool_call_id"]) == (mended["kind"], mended["tool_call_id"])
        assert isinstance(op["record"], int)


def test_a_blank_line_counts_in_the_record_index(tmp_path: Path) -> None:
    lines = BROKEN.read_bytes().split(b"\n")
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_bytes(b"\n".join([lines[0], b"", *lines[1:]]))
    before = orjson.loads(run("check", "--json", str(BROKEN))[1])["files"][0]["faults"]
    after = orjson.loads(run("check", "--json", str(spaced))[1])["files"][0]["faults"]
    assert [f["record"] + 1 for f in before] == [f["record"] for f in after]


def test_fix_out_writes_the_repair_and_leaves_the_input(tmp_path: Path) -> None:
    status, out, _ = run("fix", str(BROKEN), "--out", str(tmp_path / "fixed"))
    assert status == 0
    repaired = (tmp_path / "fixed" / BROKEN.name).read_bytes()
    assert repaired == analyze(BROKEN.read_bytes(), BROKEN.name).repaired != BROKEN.read_bytes()
    assert out.decode() == (
        f"{BROKEN}: claude_code, faults: missing_result=1; ops: insert_result=1 "
        f"-> {tmp_path / 'fixed' / BROKEN.name}\n"
    )
    assert run("check", str(tmp_path / "fixed" / BROKEN.name))[0] == 0


def test_fix_in_place_keeps_a_backup_and_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(BROKEN, path)
    os.chmod(path, 0o640)
    status, out, err = run("fix", "--in-place", "--json", str(path))
    assert status == 0, err
    [entry] = orjson.loads(out)["files"]
    backup = Path(entry["backup"])
    assert backup.parent == tmp_path and backup.name.startswith(f"session.jsonl{BACKUP_MARK}")
    assert backup.read_bytes() == BROKEN.read_bytes()
    assert path.read_bytes() == analyze(BROKEN.read_bytes(), path.name).repaired
    assert path.stat().st_mode & 0o777 == 0o640
    assert leftovers(tmp_path) == [backup.name]
    # Repaired, it is healthy: a second run leaves it as it is, with no new backup.
    status, out, _ = run("fix", "--in-place", str(path))
    assert status == 0 and out.decode().endswith("; left as it was\n")
    assert leftovers(tmp_path) == [backup.name]


def _changing_analyze(monkeypatch: pytest.MonkeyPatch, change: object) -> None:
    real = cli.analyze

    def analyze_while_the_agent_writes(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        change()  # type: ignore[operator]
        return result

    monkeypatch.setattr(cli, "analyze", analyze_while_the_agent_writes)


def test_fix_in_place_refuses_a_file_that_grew_while_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(BROKEN, path)
    line = b'{"type":"user","message":{"role":"user","content":"still here"}}\n'

    def append() -> None:
        with open(path, "ab") as f:
            f.write(line)

    _changing_analyze(monkeypatch, append)
    status, _, err = run("fix", "--in-place", str(path))
    assert status == 2
    assert "changed while it was read" in err and "nothing was written" in err
    assert path.read_bytes() == BROKEN.read_bytes() + line
    assert leftovers(tmp_path) == []


def test_fix_in_place_refuses_a_file_rewritten_with_its_size_and_time_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(BROKEN, path)
    stat = path.stat()
    changed = BROKEN.read_bytes().replace(b"a", b"b", 1)

    def rewrite_in_place() -> None:
        with open(path, "r+b") as f:
            f.write(changed)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    _changing_analyze(monkeypatch, rewrite_in_place)
    status, _, err = run("fix", "--in-place", str(path))
    assert status == 2 and "bytes changed while it was read" in err
    assert path.read_bytes() == changed
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="reads Linux's /proc")
def test_fix_in_place_refuses_a_file_an_agent_holds_open_for_writing(tmp_path: Path) -> None:
    # Codex keeps its rollout file open while it runs: a file replaced under it would
    # lose every record it appends after the replacement.
    path = tmp_path / "session.jsonl"
    shutil.copyfile(BROKEN, path)
    with held_open(path, "ab") as pid:
        status, out, err = run("fix", "--in-place", "--json", str(path))
    assert status == 2
    assert f"held open for writing by process {pid} (python" in err
    assert "nothing was written" in err
    [entry] = orjson.loads(out)["files"]
    assert "held open for writing" in entry["error"] and entry["written"] is None
    assert path.read_bytes() == BROKEN.read_bytes()
    assert leftovers(tmp_path) == []
    # Held open for reading only (a viewer, `tail -f`), the file is repaired.
    with held_open(path, "rb"):
        status, _, err = run("fix", "--in-place", str(path))
    assert status == 0, err
    assert path.read_bytes() == analyze(BROKEN.read_bytes(), path.name).repaired


def test_a_folder_is_walked_for_every_session_and_subagent_file(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-home-alice-app"
    (project / "s1" / "subagents").mkdir(parents=True)
    shutil.copyfile(BROKEN, project / "s1.jsonl")
    shutil.copyfile(HEALTHY, project / "s1" / "subagents" / "agent-a1.jsonl")
    shutil.copyfile(BROKEN, project / f"s1.jsonl{BACKUP_MARK}20260101T000000000000Z")
    (project / "notes.txt").write_text("not a session")
    status, out, _ = run("check", "--json", str(tmp_path / "projects"))
    assert status == 1
    files = orjson.loads(out)["files"]
    # The session before its subagents: a folder's own files before its subfolders'.
    assert [(f["path"], len(f["faults"])) for f in files] == [
        (str(project / "s1.jsonl"), 1),
        (str(project / "s1" / "subagents" / "agent-a1.jsonl"), 0),
    ]
    status, _, _ = run("fix", str(tmp_path / "projects"), "--out", str(tmp_path / "fixed"))
    assert status == 0
    fixed = tmp_path / "fixed" / "-home-alice-app"
    assert (fixed / "s1" / "subagents" / "agent-a1.jsonl").read_bytes() == HEALTHY.read_bytes()
    assert (fixed / "s1.jsonl").read_bytes() == analyze(BROKEN.read_bytes(), "s1.jsonl").repaired


def test_a_walked_folder_skips_json_that_is_no_session_but_not_a_broken_one(
    tmp_path: Path,
) -> None:
    # Gemini CLI keeps a prompt log and settings beside its sessions.
    folder = tmp_path / "gemini"
    folder.mkdir()
    shutil.copyfile(SAMPLES / "formats" / "gemini_cli_checkpoint.json", folder / "chat.json")
    (folder / "logs.json").write_text(
        '[{"sessionId":"a1","messageId":0,"type":"user","message":"fix the build",'
        '"timestamp":"2026-11-30T10:00:00.000Z"}]'
    )
    (folder / "settings.json").write_text('{"theme":"Default"}\n')
    status, out, err = run("check", "--json", str(folder))
    assert status in (0, 1), err
    files = {Path(f["path"]).name: f for f in orjson.loads(out)["files"]}
    skipped = {name: f.get("skipped") for name, f in files.items()}
    assert skipped == {
        "chat.json": None,
        "logs.json": "not a session file",
        "settings.json": "not a session file",
    }
    assert "error" not in files["chat.json"] or files["chat.json"]["error"] is None
    assert f"{folder / 'logs.json'}: skipped: not a session file" in err
    status, _, err = run("fix", str(folder), "--out", str(tmp_path / "fixed"))
    assert status == 0, err
    assert sorted(p.name for p in (tmp_path / "fixed").iterdir()) == ["chat.json"]
    # JSON lines of no format are still an error in a folder: agents append sessions so.
    (folder / "odd.jsonl").write_text('{"theme":"Default"}\n{"theme":"Dark"}\n')
    status, _, err = run("check", str(folder))
    assert status == 2 and "odd.jsonl: unreadable" in err
    (folder / "odd.jsonl").unlink()
    # A broken session in the folder is still an error, and so is a named non-session.
    (folder / "cut.json").write_text('[{"role":"user","content":"x"')
    status, _, err = run("check", str(folder))
    assert status == 2 and "cut.json: unreadable" in err
    status, _, err = run("check", str(folder / "settings.json"))
    assert status == 2 and "gemini/settings.json: unreadable: line 1: unknown format" in err


def test_a_walked_agent_folder_skips_the_agents_prompt_histories(tmp_path: Path) -> None:
    # `pairfix check ~/.claude` meets Claude Code's up-arrow history beside the projects,
    # and ~/.codex Codex's: JSON lines, but no session, so no reason to exit 2.
    claude = tmp_path / ".claude"
    (claude / "projects" / "-home-me-app").mkdir(parents=True)
    shutil.copy(BROKEN, claude / "projects" / "-home-me-app" / "s.jsonl")
    (claude / "history.jsonl").write_text(
        '{"display":"fix the bug","pastedContents":{},"timestamp":1764000000000,'
        '"project":"/home/me/app"}\n'
        '{"display":"/model","pastedContents":{},"timestamp":1764000060000,'
        '"project":"/home/me/app"}\n'
    )
    codex = tmp_path / ".codex"
    codex.mkdir()
    (codex / "history.jsonl").write_text(
        '{"session_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","ts":1764000000,"text":"go"}\n'
    )
    status, out, err = run("check", "--json", str(claude), str(codex))
    assert status == 1, err  # the one session's fault, nothing unreadable
    skipped = {f["path"]: f.get("skipped") for f in orjson.loads(out)["files"]}
    assert skipped[str(claude / "history.jsonl")] == (
        "not a session file: Claude Code's prompt history (~/.claude/history.jsonl)"
    )
    assert skipped[str(codex / "history.jsonl")] == (
        "not a session file: Codex's prompt history (~/.codex/history.jsonl)"
    )
    assert f"{codex / 'history.jsonl'}: skipped: Codex's prompt history" in err
    # Named on the command line, it is refused saying what it is.
    status, _, err = run("check", str(codex / "history.jsonl"))
    assert status == 2
    assert "not a session file: this is Codex's prompt history" in err


def test_standard_input_is_read_and_the_repair_written_to_standard_output() -> None:
    status, out, err = run("fix", "-", "--out", "-", stdin=BROKEN.read_bytes())
    assert status == 0
    assert out == analyze(BROKEN.read_bytes(), BROKEN.name).repaired
    assert "<stdin>: claude_code, faults: missing_result=1" in err
    status, out, _ = run("check", "-", stdin=HEALTHY.read_bytes())
    assert status == 0 and out.decode().startswith("<stdin>: claude_code, faults: none")


def test_standard_input_cannot_be_repaired_in_place() -> None:
    status, _, err = run("fix", "--in-place", "-", stdin=BROKEN.read_bytes())
    assert status == 2 and "cannot be repaired in place" in err


def test_dry_run_prints_the_plan_and_a_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(BROKEN, path)
    status, out, _ = run("fix", "--dry-run", "--in-place", str(path))
    assert status == 1
    text = out.decode()
    assert "  insert_result toolu_01CCCCCCCCCCCCCCCCCCCCCC at record" in text
    assert f"--- {path} (before)" in text and f"+++ {path} (after)" in text
    assert '+{"parentUuid"' in text or "+{" in text
    assert path.read_bytes() == BROKEN.read_bytes() and leftovers(tmp_path) == []
    status, _, _ = run("fix", "--dry-run", str(path), "--out", str(tmp_path / "nowhere"))
    assert status == 1 and not (tmp_path / "nowhere").exists()


def test_policy_and_format_are_applied(tmp_path: Path) -> None:
    status, out, _ = run("fix", "--policy", "discard", str(BROKEN), "--out", str(tmp_path))
    assert status == 0 and "ops: drop_call=1" in out.decode()
    status, _, err = run("check", "--format", "openai_chat", str(BROKEN))
    assert status == 2 and "one JSON document" in err


def test_preview_says_so_for_a_format_no_agent_loads() -> None:
    status, _, err = run("preview", str(SAMPLES / "formats" / "openai_chat.json"))
    assert status == 2
    assert "no agent loads it, so there is no resume to preview" in err


def test_preview_of_a_folder_asks_for_one_file(tmp_path: Path) -> None:
    # An agent resumes one session at a time: previewing "the first file found" of a
    # folder (a subagent's, say) would answer a question nobody asked.
    (tmp_path / "subagents").mkdir()
    shutil.copy(BROKEN, tmp_path / "s.jsonl")
    shutil.copy(HEALTHY, tmp_path / "subagents" / "agent-a1.jsonl")
    status, out, err = run("preview", str(tmp_path))
    assert (status, out) == (2, b"")
    assert err == (
        f"{tmp_path}: is a folder; preview shows one session file: name it (this folder "
        "holds 2 session files; `pairfix check` lists them)\n"
    )
    status, out, _ = run("preview", "--json", str(tmp_path))
    assert status == 2
    assert orjson.loads(out)["error"].startswith("is a folder; preview shows one session file")


def test_preview_shows_what_the_agent_sends_on_resume() -> None:
    status, out, _ = run("preview", str(BROKEN))
    text = out.decode()
    assert status == 0
    assert text.startswith(f"{BROKEN}: Claude Code resumes it with ")
    assert "  user 'Run the unit tests and show me failures.'" in text
    assert "dropped: call toolu_01CCCCCCCCCCCCCCCCCCCCCC of record 8" in text
    assert text.endswith("  anthropic accepts the request\n")
    status, out, _ = run("preview", "--json", str(BROKEN))
    document = orjson.loads(out)
    assert (status, document["agent"], document["valid"]) == (0, "Claude Code", True)
    assert [(d["record"], d["tool_call_id"]) for d in document["dropped"]] == [
        (8, "toolu_01CCCCCCCCCCCCCCCCCCCCCC")
    ]


def test_the_console_script_runs_as_installed() -> None:
    script = Path(sys.executable).with_name("pairfix")
    done = subprocess.run(
        [str(script), "check", str(BROKEN)], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert b"missing_result toolu_01CCCCCCCCCCCCCCCCCCCCCC" in done.stdout


def test_it_loads_no_django_at_all() -> None:
    code = (
        "import sys; from transcripts import cli;"
        f"status = cli.main(['check', {str(BROKEN)!r}]);"
        "sys.stdout.flush();"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True)
    assert done.stdout.decode().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", [["check"], ["fix", "--in-place"], ["fix", "--out", "OUT"]])
def test_a_folder_of_other_json_only_holds_no_session_and_exits_2(
    tmp_path: Path, command: list[str]
) -> None:
    """Settings and logs skipped one by one are no healthy session (was: exit 0, "healthy")."""
    folder = tmp_path / "gemini"
    folder.mkdir()
    (folder / "settings.json").write_text('{"theme": "dark"}')
    (folder / "logs.json").write_text('{"entries": 3}')
    argv = [str(tmp_path / "out") if part == "OUT" else part for part in command]
    status, out, err = run(*argv, str(folder))
    assert (status, out) == (2, b"")
    assert (
        err.splitlines()[-1] == f"{folder}: no session files found (2 skipped: not session files)"
    )
    status, out, _ = run(*argv, "--json", str(folder))
    document = orjson.loads(out)
    assert status == document["status"] == 2
    assert [entry["skipped"] for entry in document["files"]] == ["not a session file"] * 2
    assert (folder / "settings.json").read_text() == '{"theme": "dark"}'


def test_check_of_a_folder_without_sessions_says_so_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a session")
    status, out, err = run("check", str(tmp_path))
    assert (status, out) == (2, b"")
    assert err == f"{tmp_path}: no session files found\n"
    status, out, _ = run("check", "--json", str(tmp_path))
    assert status == 2 and orjson.loads(out)["files"] == []


def test_dry_run_needs_no_out_folder(tmp_path: Path) -> None:
    status, out, _ = run("fix", "--dry-run", str(BROKEN))
    assert status == 1
    assert "  insert_result toolu_01CCCCCCCCCCCCCCCCCCCCCC at record" in out.decode()
    status, _, err = run("fix", str(BROKEN))
    assert status == 2 and "fix needs --out DIR or --in-place" in err


def test_preview_with_a_policy_shows_the_repaired_file() -> None:
    status, raw, _ = run("preview", str(BROKEN))
    assert status == 0 and "answers toolu_01CCCCCCCCCCCCCCCCCCCCCC" not in raw.decode()
    status, out, _ = run("preview", "--policy", "synthesize", str(BROKEN))
    text = out.decode()
    assert status == 0
    assert text.startswith(f"{BROKEN} as synthesize repairs it: Claude Code resumes it with 8 ")
    # The synthetic result answers the call the raw file's resume drops.
    assert "  assistant calls toolu_01CCCCCCCCCCCCCCCCCCCCCC\n" in text
    assert "answers toolu_01CCCCCCCCCCCCCCCCCCCCCC" in text
    assert "dropped: call toolu_01CCCCCCCCCCCCCCCCCCCCCC" not in text
    status, out, _ = run("preview", "--json", "--policy", "discard", str(BROKEN))
    document = orjson.loads(out)
    assert (status, document["repaired_by"], document["dropped"]) == (0, "discard", [])


def test_check_names_the_faults_a_compaction_hid_apart() -> None:
    # Case 01: an orphaned result after the compaction (sent, so a fault) and one
    # unanswered call before it (not sent: shown apart, as the session page does).
    case = CASES / "01_cc-compaction-orphan-result.jsonl"
    status, out, _ = run("check", "--grace", "0", str(case))
    assert status == 1
    assert (
        "  1 more fault before the compaction at record 7, not counted: the agent sends only what "
        "follows it (7 records before it are not sent)"
    ) in out.decode()
    status, out, _ = run("check", "--json", "--grace", "0", str(case))
    [entry] = orjson.loads(out)["files"]
    assert entry["before_compaction"] == {"record": 7, "records": 7, "faults": 1}


@pytest.mark.parametrize("lead", ["summary", "file-history-snapshot"])
def test_a_session_opening_with_many_unplaceable_lines_is_still_read(
    tmp_path: Path, lead: str
) -> None:
    # A resumed Claude Code session can open with dozens of summary or snapshot lines.
    lines = b"".join(
        orjson.dumps({"type": lead, "leafUuid": f"u{n}", "messageId": f"m{n}"}) + b"\n"
        for n in range(120)
    )
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes(lines + BROKEN.read_bytes())
    status, out, err = run("check", "--json", str(folder))
    assert status == 1, err
    [entry] = orjson.loads(out)["files"]
    assert entry["format"] == "claude_code"
    assert [f["kind"] for f in entry["faults"]] == ["missing_result"]


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "soon"])
def test_grace_is_a_finite_number_of_seconds(value: str) -> None:
    try:
        status, _, err = run("check", f"--grace={value}", str(BROKEN))
    except SystemExit as exc:  # argparse's own exit
        status = int(exc.code or 0)
    assert status == 2


@pytest.mark.skipif(
    not Path("/proc/self/fdinfo").is_dir() or os.geteuid() != 0, reason="root, reads /proc"
)
def test_another_users_process_that_may_write_the_file_counts_as_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run as a user who cannot list another user's descriptors (as a dashboard's service
    # user in a shared folder): a process of a user who may write the file may hold it.
    from transcripts import replace

    path = tmp_path / "session.jsonl"
    shutil.copyfile(BROKEN, path)
    with subprocess.Popen(["sleep", "30"], user=65534) as other:
        try:
            real_listdir = os.listdir

            def listdir(folder: str) -> list[str]:
                if folder == f"/proc/{other.pid}/fd":
                    raise PermissionError(13, "Permission denied", folder)
                return real_listdir(folder)

            monkeypatch.setattr(replace.os, "listdir", listdir)
            os.chmod(path, 0o644)  # only its owner (root) may write it: not counted
            assert replace.writers_of(path) == []
            os.chmod(path, 0o666)  # anyone may: the sleeping process may hold it
            assert replace.writers_of(path) == [
                (other.pid, "sleep, another user's: not inspectable")
            ]
            status, _, err = run("fix", "--in-place", str(path))
            assert status == 2 and f"process {other.pid} (sleep, another user's" in err
            assert path.read_bytes() == BROKEN.read_bytes()
        finally:
            other.kill()


def test_fix_says_which_faults_its_policy_left_as_found(tmp_path: Path) -> None:
    # openmaic leaves results of unknown calls where they are, as OpenMAIC does.
    case = CASES / "01_cc-compaction-orphan-result.jsonl"
    status, out, err = run(
        "fix", "--policy", "openmaic", "--json", str(case), "--out", str(tmp_path)
    )
    assert status == 0, err
    assert f"{case}: left as found under openmaic: orphaned_result=1" in err
    assert run("check", str(tmp_path / case.name))[0] == 1  # as the note warns
    status, _, err = run("fix", str(case), "--out", str(tmp_path / "synthesize"))
    assert status == 0 and "left as found" not in err


def test_json_marks_a_finding_that_is_no_fault(tmp_path: Path) -> None:
    fixed, chat = tmp_path / "fixed", SAMPLES / "formats" / "openai_chat.json"
    run("fix", str(chat), "--out", str(fixed))  # a generic synthetic result: a marker
    status, out, _ = run("check", "--json", str(fixed / chat.name))
    assert status == 0
    [entry] = orjson.loads(out)["files"]
    assert [(f["kind"], f["informational"]) for f in entry["faults"]] == [
        ("existing_synthetic", True)
    ]


def test_fix_out_naming_a_session_file_writes_that_file(tmp_path: Path) -> None:
    target = tmp_path / "repaired" / "session.JSONL"
    status, out, _ = run("fix", str(BROKEN), "--out", str(target))
    assert status == 0
    assert target.is_file()
    assert target.read_bytes() == analyze(BROKEN.read_bytes(), BROKEN.name).repaired
    assert out.decode().endswith(f"-> {target}\n")
    assert leftovers(target.parent) == []
    # A folder that exists is a folder, whatever its name.
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert run("fix", str(BROKEN), str(HEALTHY), "--out", str(folder))[0] == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted([BROKEN.name, HEALTHY.name])


def test_fix_out_naming_a_file_never_replaces_one_nor_takes_several(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"another session\n")
    other.chmod(0o444)
    status, _, err = run("fix", str(BROKEN), "--out", str(other))
    assert status == 2
    assert err == (
        f"{BROKEN}: {other} exists; not overwritten (remove it, or name another file or a folder)\n"
    )
    assert other.read_bytes() == b"another session\n"
    status, _, err = run("fix", str(BROKEN), str(HEALTHY), "--out", str(tmp_path / "two.jsonl"))
    assert status == 2
    assert err == (
        f"--out {tmp_path / 'two.jsonl'} names one file (it ends .jsonl), and more than one "
        "session file was given: name a folder for several\n"
    )
    # A missing input makes nothing, file or folder.
    status, _, err = run("fix", str(tmp_path / "nosuch.jsonl"), "--out", str(tmp_path / "x.jsonl"))
    assert status == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.jsonl"]


def test_an_interrupted_write_leaves_no_half_written_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / BROKEN.name).write_bytes(b"what was there\n")

    def fail(self: object, f: io.BufferedWriter) -> None:
        f.write(b'{"half":')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("transcripts.engine.Analysis.write_repaired", fail)
    status, _, err = run("fix", str(BROKEN), "--out", str(target))
    assert status == 2
    assert "cannot write" in err and "No space left on device" in err
    assert (target / BROKEN.name).read_bytes() == b"what was there\n"
    assert leftovers(target) == []


@pytest.mark.parametrize(
    ("command", "name", "says"),
    [
        (["gzip", "-c"], "s.jsonl.gz", "the file is gzip-compressed: decompress it first"),
        (["bzip2", "-c"], "s.jsonl.bz2", "the file is bzip2-compressed: decompress it first"),
        (["xz", "-c"], "s.jsonl.xz", "the file is xz-compressed: decompress it first"),
    ],
)
def test_a_compressed_session_is_named_as_such(
    tmp_path: Path, command: list[str], name: str, says: str
) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    packed = subprocess.run([*command, str(BROKEN)], capture_output=True, check=True).stdout
    (tmp_path / name).write_bytes(packed)
    status, _, err = run("check", str(tmp_path / name))
    assert status == 2
    # The file named once, and the pipe that reads it.
    cat = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat"}[command[0]]
    assert err == (
        f"{tmp_path / name}: unreadable: line 1: {says}, or pipe it in: "
        f"`{cat} {tmp_path / name} | pairfix check -`\n"
    )
    # A stream's bytes came once: no command is named that would read them again.
    status, _, err = run("check", "-", stdin=packed)
    assert status == 2
    assert err == f"<stdin>: unreadable: line 1: {says}\n"
    # A first line that only looks like a compressed file's start is read as a line.
    (tmp_path / "plain.jsonl").write_bytes(b"BZh9 not bzip2\n" + BROKEN.read_bytes())
    status, out, _ = run("check", "--json", str(tmp_path / "plain.jsonl"))
    assert status == 1
    assert "malformed_record" in out.decode()


def test_fix_out_naming_a_file_that_is_no_session_file_says_so(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    status, _, err = run("fix", str(BROKEN), "--out", str(notes))
    assert status == 2
    assert err == (
        f"--out {notes} exists and is not a folder: name a folder, or a new file ending "
        ".jsonl or .json (- for standard output)\n"
    )
    assert notes.read_text() == "mine\n"


def test_a_dry_runs_diff_shows_where_a_long_line_changed() -> None:
    status, out, _ = run("fix", "--dry-run", "--grace", "0", str(BROKEN))
    assert status == 1
    changed = [line for line in out.decode().splitlines() if line.startswith("+{")]
    # The result the repair writes sits past the line's first 200 characters.
    assert any('"tool_use_id":"toolu_01CCCCCCCCCCCCCCCCCCCCCC"' in line for line in changed)
    assert all(len(line) <= cli.DIFF_LINE_CHARS + 2 for line in out.decode().splitlines())


def test_fix_says_what_claude_code_does_with_a_cut_line_it_leaves(tmp_path: Path) -> None:
    # A crash cut the last line: the repair keeps it (synthesize flags malformed lines)
    # and says what the agent does with it rather than "the provider may still refuse".
    data = BROKEN.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data + data.splitlines()[0][:40])
    status, _, err = run("fix", "--grace", "0", str(cut), "--out", str(tmp_path / "fixed"))
    assert status == 0, err
    assert (
        f"{cut}: left as found under synthesize: malformed_record=1 (Claude Code skips a line "
        "it cannot parse when it loads the session"
    ) in err
    assert "`--policy discard` drops such lines)" in err and "may still refuse" not in err


def test_a_file_whose_first_line_is_no_json_is_called_not_json(tmp_path: Path) -> None:
    text = tmp_path / "log.jsonl"
    text.write_bytes(b'hello\n{"a": 1}\n{"b": 2}\n')
    status, _, err = run("check", str(text))
    assert status == 2
    assert err == (
        f"{text}: unreadable: line 1: not JSON (column 1: unexpected character, expected a "
        "JSON value): not a session file Pairfix reads\n"
    )
    # JSON lines of a layout Pairfix does not know keep their own wording.
    (tmp_path / "other.jsonl").write_bytes(b'{"a": 1}\n{"b": 2}\n')
    status, _, err = run("check", str(tmp_path / "other.jsonl"))
    assert status == 2
    assert err == (
        f"{tmp_path / 'other.jsonl'}: unreadable: line 1: unknown format: JSON lines, but not "
        "one of the formats Pairfix reads\n"
    )


def test_preview_of_two_files_says_it_takes_one_and_version_prints_it() -> None:
    status, out, err = run("preview", str(BROKEN), str(HEALTHY))
    assert status == 2 and out == b""
    assert err.startswith("usage: pairfix preview ")
    assert err.endswith(
        "pairfix preview: error: preview takes one session file (a file, or - for standard "
        "input); run it once per file\n"
    )
    assert "unrecognized arguments" not in err
    status, out, _ = run("--version")
    assert (status, out) == (0, b"pairfix 0.1.0\n")
    assert run("--version", "check", "nowhere.jsonl")[:2] == (0, b"pairfix 0.1.0\n")
    assert "--version   print the installed version" in cli._parser().format_help()


def test_a_claude_code_call_with_a_null_id_is_checked_and_the_folder_goes_on(
    tmp_path: Path,
) -> None:
    """Its resume line is modelled (the call dropped unanswered); the next file is read too.

    Claude Code's resume model looked the call up by the id as written
    (None) among ids it had made strings ("None"): StopIteration, and
    `check` of the folder stopped with a traceback at that file.
    """
    line = {"parentUuid": None, "isSidechain": False, "cwd": "/h", "sessionId": "s1"}
    records = [
        {**line, "type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u1"},
        {
            **line,
            "parentUuid": "u1",
            "type": "assistant",
            "uuid": "u2",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": None, "name": "Bash", "input": {}}],
            },
        },
        {**line, "parentUuid": "u2", "type": "user", "uuid": "u3",
         "message": {"role": "user", "content": "next"}},
    ]  # fmt: skip
    (tmp_path / "a.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    shutil.copyfile(BROKEN, tmp_path / "b.jsonl")
    status, out, err = run("check", "--grace", "0", "--json", str(tmp_path))
    files = orjson.loads(out)["files"]
    assert (status, [Path(f["path"]).name for f in files]) == (1, ["a.jsonl", "b.jsonl"])
    assert "malformed_call" in {f["kind"] for f in files[0]["faults"]}
    assert "Traceback" not in err
