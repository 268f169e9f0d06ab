"""Pairing follows the live branch; sidechains pair on their own; abandoned branches are ignored."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from transcripts.engine import PRESETS, FileSource, analyze


def _cc(uuid: str, parent: str | None, kind: str, content: object, **extra: object) -> dict:
    message: dict = {"role": kind, "content": content}
    if kind == "assistant":
        message["id"] = "msg_" + uuid
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s",
        "type": kind,
        "message": message,
        "uuid": uuid,
        **extra,
    }


def _use(call_id: str) -> list[dict]:
    return [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {}}]


def _result(call_id: str) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]


def _jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()


def test_a_sidechains_orphaned_call_is_found_and_answered_inside_it() -> None:
    side = {"isSidechain": True, "agentId": "a1"}
    lines = [
        _cc("u1", None, "user", "start"),
        _cc("u2", "u1", "assistant", _use("t_main")),
        _cc("u3", "u2", "user", _result("t_main")),
        _cc("s1", None, "user", "subtask", **side),
        _cc("s2", "s1", "assistant", _use("t_side"), **side),
        _cc("s3", "s2", "user", "stop", **side),
        _cc("u4", "u3", "assistant", [{"type": "text", "text": "done"}]),
    ]
    for line in lines[3:6]:
        line["isSidechain"] = True
    result = analyze(_jsonl(lines), "c.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", "t_side", 4)
    ]
    out = [json.loads(line) for line in result.repaired.splitlines()]
    inserted = out[5]
    assert inserted["parentUuid"] == "s2"
    assert inserted["isSidechain"] is True
    assert out[6]["uuid"] == "s3"
    assert out[6]["parentUuid"] == inserted["uuid"]
    assert out[7]["parentUuid"] == "u3"
    assert not analyze(result.repaired, "c.jsonl").plan


def test_a_subagents_own_file_pairs_its_conversation_once() -> None:
    # Claude Code writes a subagent to subagents/agent-*.jsonl, every line a sidechain's;
    # a retried turn leaves an abandoned branch (s3) that is not the conversation.
    side = {"isSidechain": True, "agentId": "a1"}
    lines = [
        _cc("s1", None, "user", "subtask", **side),
        _cc("s2", "s1", "assistant", _use("t_side"), **side),
        _cc("s3", "s2", "user", _result("t_gone"), **side),
        _cc("s4", "s2", "user", "stop", **side),
    ]
    for line in lines:
        line["isSidechain"] = True
    data = _jsonl(lines)
    result = analyze(data, "agent-a1.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", "t_side", 1)
    ]
    out = [json.loads(line) for line in result.repaired.splitlines()]
    inserted = [line for line in out if line["uuid"] not in ("s1", "s2", "s3", "s4")]
    assert len(inserted) == 1
    assert inserted[0]["parentUuid"] == "s2" and inserted[0]["isSidechain"] is True
    assert next(line for line in out if line["uuid"] == "s4")["parentUuid"] == inserted[0]["uuid"]
    assert not analyze(result.repaired, "agent-a1.jsonl").plan


def _pi(entry_id: str, parent: str | None, message: dict) -> dict:
    return {"type": "message", "id": entry_id, "parentId": parent, "message": message}


def test_a_result_on_an_abandoned_branch_is_not_an_orphan_of_the_live_one() -> None:
    call = {"type": "toolCall", "id": "t_old", "name": "exec", "arguments": {}}
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        _pi("e1", None, {"role": "user", "content": "hi"}),
        # An abandoned branch: a call never answered, and a stray result.
        _pi("e2", "e1", {"role": "assistant", "content": [call], "stopReason": "toolUse"}),
        _pi("e3", "e2", {"role": "toolResult", "toolCallId": "t_gone", "content": []}),
        # The live branch starts again from e1.
        _pi(
            "e4",
            "e1",
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "hello"}],
                "stopReason": "stop",
            },
        ),
        _pi("e5", "e4", {"role": "user", "content": "thanks"}),
    ]
    data = _jsonl(lines)
    result = analyze(data, "o.jsonl")
    assert result.faults == []
    assert result.repaired == data


def test_a_result_after_a_pi_compaction_whose_call_was_summarised_is_orphaned() -> None:
    call = {"type": "toolCall", "id": "t_early", "name": "exec", "arguments": {}}
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        _pi("e1", None, {"role": "user", "content": "go"}),
        _pi("e2", "e1", {"role": "assistant", "content": [call], "stopReason": "toolUse"}),
        _pi("e3", "e2", {"role": "user", "content": "wait"}),
        {
            "type": "compaction",
            "id": "e4",
            "parentId": "e3",
            "summary": "s",
            "firstKeptEntryId": "e3",
            "tokensBefore": 1,
        },
        _pi("e5", "e4", {"role": "toolResult", "toolCallId": "t_early", "content": []}),
        _pi("e6", "e5", {"role": "user", "content": "and?"}),
    ]
    result = analyze(_jsonl(lines), "o.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("orphaned_result", "t_early", 5)
    ]
    out = [json.loads(line) for line in result.repaired.splitlines()]
    assert [line["id"] for line in out] == ["s", "e1", "e2", "e3", "e4", "e6"]
    assert out[-1]["parentId"] == "e4"


def test_a_parallel_result_parented_on_its_own_call_line_answers_that_call() -> None:
    # Claude Code writes parallel calls as one line each, chained, and may parent
    # each result on its own call's line; it re-attaches them on resume.
    lines = [
        _cc("u1", None, "user", "two at once"),
        _cc("a1", "u1", "assistant", _use("toolu_a")),
        _cc("a2", "a1", "assistant", _use("toolu_b")),
        _cc("r1", "a1", "user", _result("toolu_a")),
        _cc("r2", "a2", "user", _result("toolu_b")),
        _cc("a3", "r2", "assistant", [{"type": "text", "text": "both done"}]),
    ]
    for line in lines[1:3]:
        line["message"]["id"] = "msg_shared"
    data = _jsonl(lines)
    result = analyze(data, "s.jsonl")
    assert result.faults == []
    assert result.repaired == data


CROSSED = sorted((Path(__file__).parent / "crossed_chains").glob("*.jsonl"))


@pytest.mark.parametrize("path", CROSSED, ids=[p.stem for p in CROSSED])
@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_chains_that_cross_are_paired_once_and_repaired(path: Path, policy: str) -> None:
    # Sidechain lines parented on main lines (and main on sidechain), sharing a message id
    # with them: each record is paired in one scope, so planning finds every call it needs
    # (the second attacker's fuzz found KeyError and ValueError tracebacks here).
    whole = analyze(path.read_bytes(), path.name, policy=policy)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, policy=policy, summaries=False)
        out = io.BytesIO()
        streamed.write_repaired(out)
    assert whole.error is None and whole.plan
    assert out.getvalue() == whole.repaired
    # Read again, the repair plans without a traceback too (a file whose every block is
    # dropped repairs to nothing, which is no session to read again).
    if whole.repaired:
        assert analyze(whole.repaired, path.name, policy=policy).error is None


def test_a_line_branching_off_a_dropped_record_follows_it_to_its_parent(tmp_path: Path) -> None:
    # s2, an orphaned result, is dropped; s4 (on the sidechain's path) and s3 (an
    # abandoned branch off s2) both hung from it. s3 kept naming s2, a uid the repair no
    # longer held, and read as a chain of its own: a second repair found a new fault.
    side = {"isSidechain": True}
    lines = [
        _cc("u1", None, "user", "start"),
        _cc("s1", None, "user", "subtask", **side),
        _cc("s2", "s1", "user", _result("toolu_ghost"), **side),
        _cc("s3", "s2", "assistant", _use("toolu_1"), **side),
        _cc("s4", "s2", "user", "retry", **side),
        _cc("s5", "s4", "assistant", [{"type": "text", "text": "done"}], **side),
    ]
    data = _jsonl(lines)
    whole = analyze(data, "s.jsonl")
    assert [(str(f.kind), f.tool_call_id) for f in whole.faults] == [
        ("orphaned_result", "toolu_ghost")
    ]
    out = {line["uuid"]: line for line in map(json.loads, whole.repaired.splitlines())}
    assert "s2" not in out
    assert (out["s3"]["parentUuid"], out["s4"]["parentUuid"]) == ("s1", "s1")
    assert not analyze(whole.repaired, "s.jsonl").plan
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, summaries=False)
        written = io.BytesIO()
        streamed.write_repaired(written)
    assert written.getvalue() == whole.repaired


@pytest.mark.parametrize("policy", ["native", "synthesize", "discard"])
def test_a_main_chain_copy_of_a_sidechain_line_does_not_make_the_sidechain_the_main_branch(
    policy: str,
) -> None:
    """A line logged twice, its second copy without `isSidechain`, is read as its first copy.

    The walk from that copy goes through the first (the copy standing for
    the uid), so it leads into the sidechain. Taken as the main chain's
    leaf, the repair put the missing result on the sidechain, and a second
    reading found that result orphaned and the call still unanswered.
    Found by test_fuzz's mutated samples in a long run.
    """
    path = (
        Path(__file__).parents[1] / "formats/fixtures/claude_code_sidechain_call_logged_twice.jsonl"
    )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[3]["isSidechain"] = None
    data = _jsonl(lines)
    first = analyze(data, path.name, policy)
    assert [(str(f.kind), f.record) for f in first.faults] == [("missing_result", 2)]
    again = analyze(first.repaired, path.name, policy, first.format)
    assert again.faults == [] or {str(f.kind) for f in again.faults} == {"existing_synthetic"}
    assert not again.plan


def test_a_result_written_before_its_call_is_linked_to_it_once_it_is_the_leaf(
    tmp_path: Path,
) -> None:
    """Dropping the line after the call leaves the result last: its link skipped the call.

    The result kept its link to the line before its call (Claude Code puts it
    back itself), but as the file's last line it is where the walk starts,
    and the call was off it: a second reading found the result orphaned.
    Found by test_fuzz's mutated samples in a long run. Read whole and
    streamed, the repair is the same.
    """
    path = Path(__file__).parents[1] / "formats/fixtures/claude_code_result_before_its_call.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[3]["message"]["id"] = None  # the call's line is then a message of its own
    data = _jsonl(lines)
    first = analyze(data, path.name, "discard")
    assert [str(op.kind) for op in first.plan.ops] == ["drop_call"]
    out = [json.loads(line) for line in first.repaired.splitlines()]
    assert [(line["uuid"][-4:], (line["parentUuid"] or "")[-4:]) for line in out] == [
        ("0495", ""),
        ("8719", "0495"),
        ("b053", "8719"),
        ("3fd3", "b053"),
    ]
    assert not analyze(first.repaired, path.name, "discard", first.format).plan
    copy = tmp_path / path.name
    copy.write_bytes(data)
    with FileSource(copy) as source:
        streamed = analyze(source, path.name, "discard")
        buffer = io.BytesIO()
        streamed.write_repaired(buffer)
    assert buffer.getvalue() == first.repaired
