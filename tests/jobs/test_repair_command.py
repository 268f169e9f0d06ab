import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.helpers import SAMPLES
from transcripts.engine import analyze
from transcripts.models import Session

THREE_FORMATS = ["claude_code.jsonl", "openclaw.jsonl", "openai_chat.json"]


@pytest.mark.parametrize("name", THREE_FORMATS)
@pytest.mark.parametrize("policy", ["synthesize", "discard"])
def test_it_writes_a_file_with_no_faults_left(tmp_path, capsys, name, policy):
    call_command("repair", str(SAMPLES / "formats" / name), "--policy", policy, "--out", tmp_path)
    raw = (SAMPLES / "formats" / name).read_bytes()
    orphans = [f.tool_call_id for f in analyze(raw, name).faults if f.kind == "missing_result"]
    repaired = (tmp_path / name).read_bytes()
    assert repaired != raw
    again = analyze(repaired, name, policy)
    assert again.error is None
    assert not again.plan
    # What is left is only the marker of each result the repair synthesized; in Claude
    # Code's own file the default writes Claude Code's interrupt text, which is what
    # Claude Code itself writes for an interrupted call: no marker, nothing left.
    marked = [(str(f.kind), f.tool_call_id) for f in again.faults]
    synthesized = policy == "synthesize" and name != "claude_code.jsonl"
    assert marked == ([("existing_synthetic", i) for i in orphans] if synthesized else [])
    out = capsys.readouterr().out
    assert out.startswith(f"{SAMPLES / 'formats' / name}: ")
    assert "faults: missing_result=1" in out
    assert ("ops: insert_result=1" if policy == "synthesize" else "ops: drop_call=1") in out


def test_it_processes_every_file_and_fails_on_unreadable_or_missing_ones(tmp_path, capsys):
    broken = tmp_path / "in" / "broken.jsonl"
    broken.parent.mkdir()
    broken.write_bytes(b"definitely not json\n")
    out = tmp_path / "out"
    with pytest.raises(CommandError, match="2 file"):
        call_command(
            "repair",
            str(broken),
            str(tmp_path / "absent.json"),
            str(SAMPLES / "formats/claude_code.jsonl"),
            "--out",
            out,
        )
    assert [p.name for p in out.iterdir()] == ["claude_code.jsonl"]
    captured = capsys.readouterr()
    assert "broken.jsonl: unreadable: line 1: not JSON or JSON lines" in captured.err
    assert "absent.json: cannot read" in captured.err
    assert "claude_code.jsonl: claude_code, faults: missing_result=1" in captured.out


def test_it_never_overwrites_its_input(tmp_path):
    original = (SAMPLES / "formats/claude_code.jsonl").read_bytes()
    path = tmp_path / "claude_code.jsonl"
    path.write_bytes(original)
    with pytest.raises(CommandError):
        call_command("repair", str(path), "--out", tmp_path)
    assert path.read_bytes() == original


def test_it_rejects_an_unknown_policy(tmp_path):
    with pytest.raises(CommandError, match="invalid choice: 'nope'"):
        call_command(
            "repair",
            str(SAMPLES / "formats/claude_code.jsonl"),
            "--policy",
            "nope",
            "--out",
            tmp_path,
        )


@pytest.mark.django_db
def test_it_writes_nothing_to_the_database(tmp_path):
    call_command("repair", str(SAMPLES / "formats/claude_code.jsonl"), "--out", tmp_path)
    assert Session.objects.count() == 0


def test_it_refuses_a_second_input_with_the_same_file_name(tmp_path, capsys):
    first = tmp_path / "a" / "s.jsonl"
    second = tmp_path / "b" / "s.jsonl"
    other = tmp_path / "c" / "openclaw.jsonl"
    for path, name in [
        (first, "claude_code.jsonl"),
        (second, "openclaw.jsonl"),
        (other, "openclaw.jsonl"),
    ]:
        path.parent.mkdir()
        path.write_bytes((SAMPLES / "formats" / name).read_bytes())
    out = tmp_path / "out"
    with pytest.raises(CommandError, match="2 file"):
        call_command("repair", str(first), str(second), str(other), "--out", out)
    # Neither of the two is written: which one won would depend on the order named.
    assert sorted(p.name for p in out.iterdir()) == ["openclaw.jsonl"]
    captured = capsys.readouterr()
    assert (
        f"{second}: --out would write its repair to {out / 's.jsonl'}, as it would the repair "
        f"of {first}; neither is written"
    ) in captured.err
    assert f"{other}: openclaw" in captured.out


def test_it_rejects_an_out_path_that_is_a_file(tmp_path):
    out = tmp_path / "not-a-dir"
    out.write_bytes(b"keep me")
    with pytest.raises(CommandError, match=f"--out {out}: exists and is not a directory"):
        call_command("repair", str(SAMPLES / "formats/claude_code.jsonl"), "--out", out)
    assert out.read_bytes() == b"keep me"


def test_it_writes_the_report_pairfix_prints(tmp_path):
    case = SAMPLES / "cases" / "01_cc-compaction-orphan-result.jsonl"
    report = tmp_path / "report.json"
    with pytest.raises(CommandError, match="1 file"):
        call_command(
            "repair",
            str(case),
            str(tmp_path / "absent.jsonl"),
            "--out",
            tmp_path / "out",
            "--report",
            report,
        )
    document = json.loads(report.read_bytes())
    assert document["policy"] == "synthesize"
    fixed, missing = document["files"]
    assert (fixed["path"], fixed["format"], fixed["error"]) == (str(case), "claude_code", None)
    assert fixed["written"] == str(tmp_path / "out" / case.name)
    assert [(f["kind"], f["tool_call_id"], f["record"]) for f in fixed["faults"]] == [
        ("orphaned_result", "toolu_syn_out_02", 9)
    ]
    assert fixed["faults"][0]["error"].startswith("messages.0.content.1: unexpected `tool_use_id`")
    assert fixed["ops"] == [
        {
            "op": "drop_result",
            "fault": "orphaned_result",
            "fault_index": 0,
            "tool_call_id": "toolu_syn_out_02",
            "record": 9,
            "block": 0,
        }
    ]
    assert missing == {
        "path": str(tmp_path / "absent.jsonl"),
        "error": "cannot read: No such file or directory",
    }


def test_it_walks_a_folder(tmp_path):
    folder = tmp_path / "in" / "project"
    folder.mkdir(parents=True)
    (folder / "a.jsonl").write_bytes((SAMPLES / "formats/claude_code.jsonl").read_bytes())
    call_command("repair", str(tmp_path / "in"), "--out", tmp_path / "out")
    repaired = (tmp_path / "out" / "project" / "a.jsonl").read_bytes()
    assert repaired == analyze((folder / "a.jsonl").read_bytes(), "a.jsonl").repaired


def test_its_report_writes_a_lone_surrogate_in_a_tool_call_id_escaped(tmp_path):
    # Half of an emoji a Node program cut: JSON's own `\ud83d`, which orjson refuses to write.
    raw = (SAMPLES / "formats/claude_code.jsonl").read_bytes()
    session = tmp_path / "s.jsonl"
    session.write_bytes(raw.replace(b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", b"toolu_01\\ud83d"))
    report = tmp_path / "report.json"
    call_command("repair", str(session), "--out", tmp_path / "out", "--report", report)
    assert b'"tool_call_id": "toolu_01\\ud83d"' in report.read_bytes()
    [entry] = json.loads(report.read_bytes())["files"]
    assert [(f["kind"], f["tool_call_id"]) for f in entry["faults"]] == [
        ("malformed_call", "toolu_01\ud83d"),  # no id a provider takes
        ("missing_result", "toolu_01\ud83d"),
    ]
    repaired = analyze(session.read_bytes(), "s.jsonl").repaired
    assert (tmp_path / "out" / "s.jsonl").read_bytes() == repaired


def test_its_out_errors_are_escaped_for_the_terminal(tmp_path):
    file = tmp_path / "\x1b[2Jnot-a-dir"
    file.write_bytes(b"keep me")
    with pytest.raises(CommandError) as refused:
        call_command("repair", str(SAMPLES / "formats/claude_code.jsonl"), "--out", file)
    shown = f"{tmp_path}/\\x1b[2Jnot-a-dir"
    assert str(refused.value) == f"--out {shown}: exists and is not a directory"
    with pytest.raises(CommandError) as refused:
        call_command(
            "repair",
            str(SAMPLES / "formats/claude_code.jsonl"),
            "--out",
            Path(os.fsdecode(b"/proc/\xff")),
        )
    with pytest.raises(OSError) as kernel:
        os.mkdir(os.fsdecode(b"/proc/\xff"))
    assert str(refused.value) == f"--out /proc/\\xff: cannot create: {kernel.value.strerror}"


def test_a_walk_skips_the_out_folder_inside_it(tmp_path, capsys):
    folder = tmp_path / "in"
    (folder / "fixed").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes((SAMPLES / "formats/claude_code.jsonl").read_bytes())
    (folder / "fixed" / "a.jsonl").write_bytes(b"an earlier repair\n")
    call_command("repair", str(folder), "--out", folder / "fixed")
    assert f"{folder / 'fixed'}: skipped: the --out folder" in capsys.readouterr().err
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "a.jsonl",
        "fixed",
        "fixed/a.jsonl",
    ]
