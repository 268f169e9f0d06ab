"""One `pairfix fix` gives a file `pairfix check` calls healthy, and a second fix changes nothing.

Each case here once needed two repairs: the first left a fault that only its
own output showed. The checks are the user's: fix the file once (`--grace 0`,
the agent has stopped), check the repair (exit 0, no faults), fix the repair
(the same bytes), and find in the repair every tool output the policy keeps.
The property test runs the shared workload (tools/gen_sessions.py) the same
way, a few seeds of every format it writes.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from transcripts import cli

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "gen_sessions.py"


def _run(*argv: str) -> tuple[int, bytes]:
    out, err = io.BytesIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)  # type: ignore[arg-type]
    return status, out.getvalue()


def fix_once(path: Path, policy: str, tmp_path: Path) -> tuple[bytes, dict[str, Any]]:
    """Fix `path`, check the repair, fix the repair; return the repair and the check's report.

    Asserts that the first fix wrote the file, that the second fix wrote the
    same bytes again.
    """
    first, second = tmp_path / "first", tmp_path / "second"
    status, _ = _run("fix", str(path), "--out", str(first), "--grace", "0", "--policy", policy)
    assert status == 0
    repaired = (first / path.name).read_bytes()
    _, report = _run("check", str(first / path.name), "--json", "--grace", "0", "--policy", policy)
    status, _ = _run(
        "fix", str(first / path.name), "--out", str(second), "--grace", "0", "--policy", policy
    )
    assert status == 0
    assert (second / path.name).read_bytes() == repaired
    return repaired, json.loads(report)


def faults_of(report: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [
        (f["kind"], f["tool_call_id"], f["record"])
        for entry in report["files"]
        for f in entry["faults"]
        if not f["informational"]
    ]


def _lines(*objs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in objs)


# pi / OpenClaw ------------------------------------------------------------------------


def _pi_entry(entry_id: str, parent: str | None, second: int, message: dict[str, Any]) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-03-02T09:14:{second:02d}.000Z",
        "message": message,
    }


def _pi_session(stray_parent: str | None) -> bytes:
    """A pi session: a prompt, a call never answered, a prompt, then a stray tool result.

    The stray result answers a call no entry holds, and its `parentId` names
    no entry of the file (`stray_parent`: None, or a lost entry's id). pi
    starts from the last entry, so it sends that result alone.
    """
    return _lines(
        {
            "type": "session",
            "version": 3,
            "id": "0c7d6f4e-51a2-4b8e-9f3d-2a6b1c9e8d70",
            "timestamp": "2026-03-02T09:14:00.000Z",
            "cwd": "/home/dev/app",
        },
        _pi_entry(
            "a1b2c3d4",
            None,
            1,
            {"role": "user", "content": [{"type": "text", "text": "List the logs."}]},
        ),
        _pi_entry(
            "b2c3d4e5",
            "a1b2c3d4",
            3,
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "toolu_01Lsx", "name": "bash", "arguments": {}}
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "stopReason": "toolUse",
                "timestamp": 3,
            },
        ),
        _pi_entry(
            "c3d4e5f6",
            "b2c3d4e5",
            9,
            {"role": "user", "content": [{"type": "text", "text": "Stop, go on."}], "timestamp": 9},
        ),
        _pi_entry(
            "d4e5f6a7",
            stray_parent,
            12,
            {
                "role": "toolResult",
                "toolCallId": "toolu_01Gone",
                "toolName": "bash",
                "content": [{"type": "text", "text": "stray output"}],
                "isError": False,
                "timestamp": 12,
            },
        ),
    )


@pytest.mark.parametrize("stray_parent", [None, "f0f0f0f0"])
@pytest.mark.parametrize("policy", ["synthesize", "discard", "native", "openclaw"])
def test_a_stray_last_result_and_an_unanswered_call_take_one_pass_in_pi(
    tmp_path: Path, stray_parent: str | None, policy: str
) -> None:
    path = tmp_path / "2026-03-02T09-14-00-000Z_0c7d6f4e.jsonl"
    path.write_bytes(_pi_session(stray_parent))
    _, report = _run("check", str(path), "--json", "--grace", "0", "--policy", policy)
    # Both are found at once: the call is on the branch pi resumes once the stray goes.
    assert sorted(faults_of(json.loads(report))) == [
        ("missing_result", "toolu_01Lsx", 2),
        ("orphaned_result", "toolu_01Gone", 4),
    ]
    repaired, report_after = fix_once(path, policy, tmp_path)
    assert faults_of(report_after) == []
    entries = [json.loads(line) for line in repaired.splitlines()]
    texts = [json.dumps(e.get("message", {}).get("content")) for e in entries]
    assert not any("stray output" in t for t in texts)  # the orphan is dropped
    assert any("Stop, go on." in t for t in texts)  # every other message is kept
    assert any("List the logs." in t for t in texts)
    # pi resumes from the last entry: the branch with the prompt, answered or without the call.
    by_id = {e.get("id"): e for e in entries}
    walk, at = [], entries[-1]
    while at is not None:
        walk.append(at)
        at = by_id.get(at.get("parentId"))
    assert [e["message"]["role"] for e in reversed(walk)][0] == "user"
    assert walk[0]["message"]["content"] == [{"type": "text", "text": "Stop, go on."}]
    if policy == "discard":
        assert "toolu_01Lsx" not in repaired.decode()
    else:
        answers = [e for e in walk if e["message"].get("toolCallId") == "toolu_01Lsx"]
        assert len(answers) == 1


FIXTURES = ROOT / "tests" / "formats" / "fixtures"


def _pi_walk(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the entries pi sends: its walk up `parentId` from the last entry, root first."""
    by_id = {e.get("id"): e for e in entries if isinstance(e, dict)}
    walk, at = [], entries[-1]
    while at is not None and len(walk) <= len(entries):
        walk.append(at)
        at = by_id.get(at.get("parentId"))
    return walk[::-1]


@pytest.mark.parametrize("policy", ["synthesize", "native", "openclaw", "discard"])
def test_results_before_their_call_under_a_lost_line_take_one_pass_in_pi(
    tmp_path: Path, policy: str
) -> None:
    """pi results written before their call's entry, the first of them lost (a null line).

    A result of the message is read under it (its parent is the message's
    user prompt); the other calls get synthetic results, the first after
    the call's entry and the rest after that result, which the repair links
    under the first. The last of them ends the branch and must be written
    last (pi resumes from the file's last entry): it was written before the
    call's entry, so pi's walk from the first synthetic result left out the
    real output and four synthetic results, and a second repair added them
    again (found by tests/core/test_outcome.py's mutated samples).
    """
    lines = (FIXTURES / "openclaw_results_before_their_call.jsonl").read_text().splitlines()
    lines[5] = "null"  # the entry holding toolu_01A00's result, lost
    path = tmp_path / "2025-12-01T09-06-40-000Z_44444444.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _, report = _run("check", str(path), "--json", "--grace", "0", "--policy", policy)
    calls = [f"toolu_01A0{k}xxxxxxxxxxxxxxxxxxx" for k in range(6)]
    assert sorted(faults_of(json.loads(report))) == [
        ("malformed_record", None, 5),
        *(("missing_result", call, 6) for call in calls if call != calls[1]),
    ]
    repaired, report_after = fix_once(path, policy, tmp_path)
    # The null line is left as found, but where the policy drops such lines.
    left = [] if policy == "discard" else [("malformed_record", None, 8)]
    assert faults_of(report_after) == left
    entries = [json.loads(line) for line in repaired.splitlines()]
    walk = _pi_walk(entries)
    assert walk[0]["message"]["content"][0]["text"] == "Read the six modules and summarise them."
    sent = [e["message"] for e in walk if e.get("type") == "message"]
    if policy == "discard":
        # The unanswered calls go; the call a real result answers stays.
        kept = [b["id"] for m in sent if m["role"] == "assistant" for b in m["content"][1:]]
        assert kept == [calls[1]]
        return
    answered = [m["toolCallId"] for m in sent if m["role"] == "toolResult"]
    assert answered == calls  # each call answered once, in call order
    outputs = [m["content"][0]["text"] for m in sent if m["role"] == "toolResult"]
    assert outputs[1] == "def f1(): return 1"  # the tool's real output is on the branch


# Claude Code -------------------------------------------------------------------------

SESSION = "5d3c9a1e-7f42-4b6e-8a19-3c2e4d5f6a7b"


def _cc_line(n: int, parent: int | None, kind: str, message: dict[str, Any]) -> dict[str, Any]:
    uid = f"9e0c2d4f-1a3b-4c5d-8e6f-{n:012d}"
    return {
        "parentUuid": None if parent is None else f"9e0c2d4f-1a3b-4c5d-8e6f-{parent:012d}",
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/app",
        "sessionId": SESSION,
        "version": "2.1.328",
        "type": kind,
        "message": message,
        "uuid": uid,
        "timestamp": f"2026-03-02T09:20:{n:02d}.000Z",
    }


def _assistant(
    n: int, parent: int | None, message_id: str, block: dict[str, Any]
) -> dict[str, Any]:
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [block],
    }
    return _cc_line(n, parent, "assistant", message)


def _call(n: int, parent: int | None, message_id: str, call_id: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}
    return _assistant(n, parent, message_id, block)


def _result(n: int, parent: int | None, call_id: str, text: str) -> dict[str, Any]:
    return _cc_line(
        n,
        parent,
        "user",
        {
            "role": "user",
            "content": [{"tool_use_id": call_id, "type": "tool_result", "content": text}],
        },
    )


def _reply(n: int, parent: int | None, message_id: str, text: str) -> dict[str, Any]:
    return _assistant(n, parent, message_id, {"type": "text", "text": text})


def test_a_self_parented_result_keeps_its_output_in_one_pass(tmp_path: Path) -> None:
    """A result line parented on itself is read under the line before it, as Claude Code reads it.

    Claude Code 2.1.328's walk takes a parent it has walked already (the line
    itself) as missing and falls back to the latest line before it in time.
    Read as a root instead, the result was an orphan: dropped, its output
    lost, and the next line's parent gone, so a second repair read the file
    in file order and found the call unanswered.
    """
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(
        _lines(
            _cc_line(1, None, "user", {"role": "user", "content": "List the logs."}),
            _call(2, 1, "msg_01Aa", "toolu_01Aa"),
            _result(3, 3, "toolu_01Aa", "app.log\nerr.log"),  # parented on itself
            _result(4, 3, "toolu_01Stray", "stray output"),
            _reply(5, 4, "msg_01Bb", "Two logs."),
        )
    )
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [("orphaned_result", "toolu_01Stray", 3)]
    repaired, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []
    assert b"app.log\\nerr.log" in repaired  # the tool's output is kept
    assert b"stray output" not in repaired


@pytest.mark.parametrize("policy", ["synthesize", "discard"])
def test_self_parented_call_lines_take_one_pass(tmp_path: Path, policy: str) -> None:
    """Two call lines of one message, each parented on itself, neither answered.

    Discarding the second call dropped its line; the reply's parent was then
    no line, no line linked another, and a second repair read the file in
    file order and found the first call unanswered too.
    """
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(
        _lines(
            _cc_line(1, None, "user", {"role": "user", "content": "List the logs."}),
            _call(2, 2, "msg_01Aa", "toolu_01Aa"),
            _call(3, 3, "msg_01Aa", "toolu_01Ab"),
            _reply(4, 3, "msg_01Bb", "Interrupted."),
        )
    )
    _, report = _run("check", str(path), "--json", "--grace", "0", "--policy", policy)
    assert faults_of(json.loads(report)) == [
        ("missing_result", "toolu_01Aa", 1),
        ("missing_result", "toolu_01Ab", 2),
    ]
    repaired, report_after = fix_once(path, policy, tmp_path)
    assert faults_of(report_after) == []
    assert b"List the logs." in repaired and b"Interrupted." in repaired


def test_a_self_parented_line_long_after_the_one_before_starts_the_chain(tmp_path: Path) -> None:
    """Over 5 s after the line before it, Claude Code's walk ends at a self-parented line.

    So the conversation it sends opens with that line (here a result whose
    call is before it: an orphan to the provider), and one repair settles it.
    """
    late = _result(3, 3, "toolu_01Aa", "app.log")
    late["timestamp"] = "2026-03-02T09:21:03.000Z"
    reply = _reply(4, 3, "msg_01Bb", "One log.")
    reply["timestamp"] = "2026-03-02T09:21:04.000Z"
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(
        _lines(
            _cc_line(1, None, "user", {"role": "user", "content": "List the logs."}),
            _call(2, 1, "msg_01Aa", "toolu_01Aa"),
            late,
            reply,
        )
    )
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [("orphaned_result", "toolu_01Aa", 2)]
    _, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []


# A result moved out of the message another result is inserted into ---------------------


def _bodies() -> dict[str, tuple[str, Any]]:
    """Return {format: (file name, document)}: a call, a second call, then the first's result.

    The result of c6 comes after c8's message: it is moved up to c6, and c8
    is answered by a synthetic result that opens the message after c8's,
    the very message the move empties.
    """
    anthropic = [
        {"role": "user", "content": "Run both."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c6", "name": "t", "input": {}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c8", "name": "t", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c6", "content": "six"}],
        },
    ]
    bedrock = [
        {"role": "user", "content": [{"text": "Run both."}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "c6", "name": "t", "input": {}}}],
        },
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "c8", "name": "t", "input": {}}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "c6",
                        "content": [{"text": "six"}],
                        "status": "success",
                    }
                }
            ],
        },
    ]
    gemini = [
        {"role": "user", "parts": [{"text": "Run both."}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c6", "name": "t", "args": {}}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c8", "name": "t", "args": {}}}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c6", "name": "t", "response": {"output": "six"}}}
            ],
        },
    ]
    chat = [
        {"role": "user", "content": "Run both."},
        *(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "t", "arguments": "{}"}}
                ],
            }
            for c in ("c6", "c8")
        ),
        {"role": "tool", "tool_call_id": "c6", "content": "six"},
    ]
    return {
        "anthropic": (
            "request.json",
            {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": anthropic},
        ),
        "bedrock": ("converse.json", bedrock),
        "gemini": ("gemini.json", {"contents": gemini}),
        "openai_chat": ("chat.json", {"model": "gpt-4o", "messages": chat}),
    }


def _answers(fmt: str, message: dict[str, Any]) -> list[str]:
    """Return the tool call ids a message's results answer, in order."""
    if fmt == "openai_chat":
        return [message["tool_call_id"]] if message["role"] == "tool" else []
    blocks = message.get("parts") if fmt == "gemini" else message.get("content")
    ids = []
    for block in blocks if isinstance(blocks, list) else []:
        if block.get("type") == "tool_result":
            ids.append(block["tool_use_id"])
        elif "toolResult" in block:
            ids.append(block["toolResult"]["toolUseId"])
        elif "functionResponse" in block:
            ids.append(block["functionResponse"]["id"])
    return ids


@pytest.mark.parametrize("fmt", ["anthropic", "bedrock", "gemini", "openai_chat"])
@pytest.mark.parametrize("policy", ["synthesize", "native"])
def test_an_insert_into_the_message_a_move_empties_takes_one_pass(
    tmp_path: Path, fmt: str, policy: str
) -> None:
    """The move carried c6's result's whole message up, and the insert for c8 with it: lost.

    Messages `[assistant(c6), assistant(c8), user(result c6)]`. The synthetic
    result for c8 went into the user message after c8's, which the move of
    c6's result took away whole, so the repair answered c6 and not c8, and a
    second repair was needed. The message now stays, holding c8's result,
    and c6's result is carried up in a message of its own.
    """
    name, doc = _bodies()[fmt]
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    _, report = _run("check", str(path), "--json", "--grace", "0", "--policy", policy)
    assert faults_of(json.loads(report)) == [
        ("missing_result", "c8", 2),
        ("displaced_result", "c6", 3),
    ]
    repaired, report_after = fix_once(path, policy, tmp_path)
    assert faults_of(report_after) == []
    out = json.loads(repaired)
    messages = out if isinstance(out, list) else out.get("messages") or out["contents"]
    # Each call's message is followed by its result: c6's real output, then c8's synthetic.
    assert [_answers(fmt, m) for m in messages] == [[], [], ["c6"], [], ["c8"]]
    assert b"six" in repaired


LOST = "9e0c2d4f-1a3b-4c5d-8e6f-00000000ffff"  # a uuid no line of the file holds


def _lost_parent_session(late: bool) -> bytes:
    """Two calls of one message, the first's result parented on a uuid no line holds.

    `late`: that result is written over 5 s after the call's last line.
    """
    first = _result(4, None, "toolu_01Aa", "app.log\nerr.log")
    first["parentUuid"] = LOST
    reply = _reply(5, 4, "msg_01Bb", "Two logs.")
    if late:
        first["timestamp"], reply["timestamp"] = (
            "2026-03-02T09:21:04.000Z",
            "2026-03-02T09:21:05.000Z",
        )
    return _lines(
        _cc_line(1, None, "user", {"role": "user", "content": "List the logs."}),
        _call(2, 1, "msg_01Aa", "toolu_01Aa"),
        _call(3, 2, "msg_01Aa", "toolu_01Ab"),
        first,
        reply,
    )


@pytest.mark.parametrize("policy", ["synthesize", "native"])
def test_a_result_whose_parent_is_no_line_keeps_its_output_in_one_pass(
    tmp_path: Path, policy: str
) -> None:
    """A result line whose `parentUuid` names no line is read under the line before it.

    Claude Code 2.1.328's walk takes a parent it cannot find as it takes one it
    has walked already: the latest line before it in time, of the same side,
    at most 5 s older (`lwn`/`ton`, "tengu_chain_timestamp_fallback"). Read
    as a root instead, the chain opened with that result: an orphan, dropped
    with the tool's output, and the next line lost its parent, so a second
    repair read the file again and found both calls unanswered.
    """
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(_lost_parent_session(late=False))
    _, report = _run("check", str(path), "--json", "--grace", "0", "--policy", policy)
    # The walk reaches the prompt: only the second call is unanswered.
    assert faults_of(json.loads(report)) == [("missing_result", "toolu_01Ab", 2)]
    repaired, report_after = fix_once(path, policy, tmp_path)
    assert faults_of(report_after) == []
    assert b"app.log\\nerr.log" in repaired  # the tool's output is kept
    lines = [json.loads(line) for line in repaired.splitlines()]
    # The synthetic result follows the real one; the reply hangs off it.
    assert [line["uuid"][-2:] for line in lines][:4] == ["01", "02", "03", "04"]
    synthetic = next(
        line for line in lines if line["uuid"][-2:] not in ("01", "02", "03", "04", "05")
    )
    assert synthetic["parentUuid"] == lines[3]["uuid"]
    assert lines[-1]["parentUuid"] == synthetic["uuid"]
    # The line the reader mended is written as it was: Claude Code mends it the same way.
    assert lines[3]["parentUuid"] == LOST


def test_a_result_whose_parent_is_no_line_long_after_the_one_before_starts_the_chain(
    tmp_path: Path,
) -> None:
    """Over 5 s after the line before it, Claude Code's walk ends at such a line.

    The conversation it sends opens with that result (its call is not on the
    chain: an orphan to the provider), and one repair settles it.
    """
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(_lost_parent_session(late=True))
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [("orphaned_result", "toolu_01Aa", 3)]
    _, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []


# The shared workload -----------------------------------------------------------------

SUFFIX = {"claude_code": "jsonl", "codex": "jsonl", "openclaw": "jsonl"}
SUFFIX |= {"openai_chat": "json", "anthropic": "json"}


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_generated_sessions_settle_in_one_pass(tmp_path: Path, fmt: str) -> None:
    """A few seeds of each format: fix, then check finds no fault, and a second fix is a no-op."""
    for seed in (1, 2, 3):
        folder = tmp_path / str(seed)
        folder.mkdir()
        path = folder / f"{fmt}-{seed}.{SUFFIX[fmt]}"
        argv = [sys.executable, str(GENERATOR), "--format", fmt, "--records", "150"]
        argv += ["--seed", str(seed), "--fault-rate", "0.3", "--parallel-rate", "0.3"]
        argv += ["--result-bytes", "20:200", "--out", str(path)]
        subprocess.run(argv, check=True, capture_output=True)
        _, report = _run("check", str(path), "--json", "--grace", "0")
        assert faults_of(json.loads(report)), f"seed {seed}: the workload injected no fault"
        for policy in ("synthesize", "discard"):
            _, report_after = fix_once(path, policy, folder / policy)
            assert faults_of(report_after) == [], f"seed {seed}, {policy}"


def test_the_same_shape_in_claude_code_takes_one_pass(tmp_path: Path) -> None:
    """Claude Code writes each result on a line of its own: the insert never shared the move's line.

    Checked so (it needed one pass before the fix too): c6's result line is
    moved under c6's call, c8's synthetic result follows c8's line.
    """
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(
        _lines(
            _cc_line(1, None, "user", {"role": "user", "content": "Run both."}),
            _call(2, 1, "msg_01Aa", "toolu_01C6"),
            _call(3, 2, "msg_01Bb", "toolu_01C8"),
            _result(4, 3, "toolu_01C6", "six"),
        )
    )
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [
        ("missing_result", "toolu_01C8", 2),
        ("displaced_result", "toolu_01C6", 3),
    ]
    repaired, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []
    assert b'"content": "six"' in repaired or b'"content":"six"' in repaired


# Results that share one message: Bedrock and Gemini ----------------------------------


def _message(fmt: str, role: str, items: list[tuple[str, str]]) -> dict[str, Any]:
    """Return one message of `fmt` holding `items`: ("text", s), ("call", id), ("result", id)."""
    blocks: list[dict[str, Any]] = []
    for kind, value in items:
        if fmt == "anthropic":
            blocks.append(
                {"type": "text", "text": value}
                if kind == "text"
                else {"type": "tool_use", "id": value, "name": "t", "input": {}}
                if kind == "call"
                else {"type": "tool_result", "tool_use_id": value, "content": f"out {value}"}
            )
        elif fmt == "bedrock":
            result = {
                "toolUseId": value,
                "content": [{"text": f"out {value}"}],
                "status": "success",
            }
            blocks.append(
                {"text": value}
                if kind == "text"
                else {"toolUse": {"toolUseId": value, "name": "t", "input": {}}}
                if kind == "call"
                else {"toolResult": result}
            )
        else:
            response = {"id": value, "name": "t", "response": {"output": f"out {value}"}}
            blocks.append(
                {"text": value}
                if kind == "text"
                else {"functionCall": {"id": value, "name": "t", "args": {}}}
                if kind == "call"
                else {"functionResponse": response}
            )
    if fmt == "gemini":
        return {"role": "model" if role == "assistant" else "user", "parts": blocks}
    return {"role": role, "content": blocks}


def _document(fmt: str, messages: list[dict[str, Any]]) -> tuple[str, bytes]:
    if fmt == "anthropic":
        body: Any = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
        return "request.json", json.dumps(body, indent=2).encode()
    if fmt == "bedrock":
        return "converse.json", json.dumps(messages, indent=2).encode()
    return "gemini.json", json.dumps({"contents": messages}, indent=2).encode()


SHARED = {
    # c1's result comes in c3's message; c2 has none: both go after c1 and c2's message.
    "a move and an insert": (
        [
            ("user", [("text", "Run them.")]),
            ("assistant", [("call", "c1"), ("call", "c2")]),
            ("assistant", [("call", "c3")]),
            ("user", [("result", "c3"), ("result", "c1")]),
        ],
        [["c1", "c2"], ["c3"]],
    ),
    # Each result a message of its own after the last call: two moves to one place.
    "two moves": (
        [
            ("user", [("text", "Run them.")]),
            ("assistant", [("call", "c1"), ("call", "c2")]),
            ("assistant", [("call", "c3")]),
            ("user", [("result", "c1")]),
            ("user", [("result", "c3")]),
            ("user", [("result", "c2")]),
        ],
        [["c1", "c2"], ["c3"]],
    ),
    # A result logged twice, in two user messages after its call.
    "a duplicate in the next message": (
        [
            ("user", [("text", "Run it.")]),
            ("assistant", [("call", "c1")]),
            ("user", [("result", "c1")]),
            ("user", [("result", "c1")]),
        ],
        [["c1"]],
    ),
}


@pytest.mark.parametrize("fmt", ["anthropic", "bedrock", "gemini"])
@pytest.mark.parametrize("case", sorted(SHARED))
def test_results_placed_after_one_message_share_one_message(
    tmp_path: Path, fmt: str, case: str
) -> None:
    """The results a repair puts after one call message go in one message, as Bedrock wants.

    Bedrock and Gemini want every result of a call message in the one
    message after it (Anthropic merges consecutive user messages). A result
    carried out of its message and a synthetic one, placed after the same
    record, were written as two messages: the second read as displaced, and
    a second repair was needed. Bedrock's check also raised (KeyError) where
    a result after the first user message was a duplicate or answered another
    message's call: only the results that answer the message's calls are
    reported as split.
    """
    messages, answered = SHARED[case]
    name, data = _document(fmt, [_message(fmt, role, items) for role, items in messages])
    path = tmp_path / name
    path.write_bytes(data)
    repaired, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []
    out = json.loads(repaired)
    written = out if isinstance(out, list) else out.get("messages") or out["contents"]
    results = [ids for m in written if (ids := _answers(fmt, m))]
    assert results == answered  # each call message's results in the one message after it
    for call in ("c1", "c3"):
        if any(("result", call) in items for _, items in messages):
            assert f"out {call}".encode() in repaired  # the tools' outputs are kept


def test_a_line_a_repair_cuts_from_its_chain_is_written_as_a_root(tmp_path: Path) -> None:
    """The chain starts at an orphan: dropped, the line after it is written with a null parent.

    Left naming the dropped line, that line's parent would be no line, and
    Claude Code's walk would take the latest line before it in time, within
    5 s, for its parent: here the abandoned call 3 s before it, which the
    repair never paired, so a second repair found it unanswered.
    """
    old_call = _call(2, 1, "msg_01Aa", "toolu_01Old")
    stray = _result(3, None, "toolu_01Gone", "stray output")  # a root
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(
        _lines(
            _cc_line(1, None, "user", {"role": "user", "content": "An old prompt."}),
            old_call,
            stray,
            _reply(4, 3, "msg_01Bb", "Done."),
        )
    )
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [("orphaned_result", "toolu_01Gone", 2)]
    repaired, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []
    lines = [json.loads(line) for line in repaired.splitlines()]
    assert b"stray output" not in repaired
    assert lines[-1]["message"]["content"][0]["text"] == "Done."
    assert lines[-1]["parentUuid"] is None
    assert lines[:2] == [json.loads(line) for line in path.read_bytes().splitlines()[:2]]


def test_a_stray_result_after_a_pi_compaction_at_the_end_takes_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stray dropped, pi resumes from the compaction entry, which no scope holds.

    Its branch was paired again and again (the entry never counted as paired):
    check, fix and preview ran for ever.
    """
    from transcripts.core import repair

    paired_again = repair.pair_resumed
    calls: list[int] = []

    def counted(transcript: Any, pairing: Any, leaf: int) -> None:
        calls.append(leaf)
        assert len(calls) < 10, "the same branch is paired again and again"
        paired_again(transcript, pairing, leaf)

    monkeypatch.setattr(repair, "pair_resumed", counted)
    model = '"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5"'
    lines = [
        '{"type":"session","version":3,"id":"s1","timestamp":"2025-04-12T00:31:07.008Z"}',
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2025-04-12T00:31:08.000Z",'
        '"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}',
        '{"type":"message","id":"a2","parentId":"a1","timestamp":"2025-04-12T00:31:09.000Z",'
        '"message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_01A",'
        f'"name":"read","arguments":{{}}}}],{model},"stopReason":"toolUse","timestamp":2}}}}',
        '{"type":"message","id":"a3","parentId":"a2","timestamp":"2025-04-12T00:31:10.000Z",'
        '"message":{"role":"toolResult","toolCallId":"toolu_01A","toolName":"read",'
        '"content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":3}}',
        '{"type":"compaction","summary":"s","firstKeptEntryId":"a1","tokensBefore":1,'
        '"id":"c1","parentId":"a3","timestamp":"2025-04-12T00:31:11.000Z"}',
        '{"type":"message","id":"a4","parentId":"c1","timestamp":"2025-04-12T00:31:12.000Z",'
        '"message":{"role":"toolResult","toolCallId":"toolu_01Z","toolName":"read",'
        '"content":[{"type":"text","text":"stray"}],"isError":false,"timestamp":4}}',
    ]
    path = tmp_path / "2026-03-02T09-14-00-000Z_0c7d6f4e.jsonl"
    path.write_bytes("\n".join(lines).encode() + b"\n")
    _, report = _run("check", str(path), "--json", "--grace", "0")
    assert faults_of(json.loads(report)) == [("orphaned_result", "toolu_01Z", 5)]
    repaired, report_after = fix_once(path, "synthesize", tmp_path)
    assert faults_of(report_after) == []
    assert b"stray" not in repaired and repaired.count(b"\n") == 5
