"""Policies: every preset repairs validly; the reference presets behave as their systems do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import sessions
from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.policy import INTERRUPTED_TEXT
from transcripts.core.validate import PROVIDERS, validate
from transcripts.engine import PRESETS, analyze
from transcripts.formats import load

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
BUILDERS = {
    "s.json": sessions.openai_chat,
    "a.json": sessions.anthropic,
    "c.jsonl": sessions.claude_code,
    "o.jsonl": sessions.openclaw,
    "x.jsonl": sessions.codex,
}
# The providers each shape is sent to: pi converts its provider-neutral messages for
# whichever provider the session switches to; the others have one wire shape.
SENT_TO = {
    "s.json": ("openai_chat",),
    "a.json": ("anthropic", "bedrock"),
    "c.jsonl": ("anthropic", "bedrock"),
    "o.jsonl": PROVIDERS,
    "x.jsonl": ("openai_responses",),
}


@settings(max_examples=150, deadline=None)
@given(
    filename=st.sampled_from(sorted(BUILDERS)),
    script=sessions.scripts(),
    policy=st.sampled_from(sorted(PRESETS)),
    data=st.data(),
)
def test_every_preset_repairs_for_every_provider(
    filename: str, script: sessions.Script, policy: str, data: st.DataObject
) -> None:
    provider = data.draw(st.sampled_from(SENT_TO[filename]))
    result = analyze(BUILDERS[filename](script), filename, policy)
    repaired = load(result.repaired, filename)
    left = validate(repaired, provider, drops_aborted=not PRESETS[policy].replays_aborted)
    if policy == "openmaic":
        # OpenMAIC leaves results of unknown calls where they are (§1A, A4): exactly
        # those remain for the provider to refuse.
        assert {v.tool_call_id for v in left} == {
            cid for kind, cid in script.expected() if kind == "orphaned_result"
        }
    else:
        assert left == []


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_every_op_names_its_fault_and_policy_row(policy: str) -> None:
    data = sessions.openclaw(
        sessions.Script([sessions.Turn(["c1", "c2", "c3"], ["missing", "duplicate", "orphan"])])
    )
    plan = analyze(data, "o.jsonl", policy).plan
    assert plan.policy == policy
    for op in plan.ops:
        action = PRESETS[policy].action(op.fault.kind)
        assert op.policy_row == f"{policy}: {op.fault.kind} -> {action}"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("claude_code.jsonl", "[Request interrupted by user for tool use]"),
        ("openclaw.jsonl", "[openclaw] " + OPENCLAW_SENTENCE),
        ("openai_chat.json", "aborted"),
    ],
)
def test_native_writes_each_agents_own_interruption_text(name: str, text: str) -> None:
    data = (SAMPLES / "formats" / name).read_bytes()
    result = analyze(data, name, "native")
    assert [op.text for op in result.plan.ops] == [text]
    assert json.dumps(text)[1:-1].encode() in result.repaired


def _case(name: str) -> tuple[str, bytes]:
    path = next((SAMPLES / "cases").glob(f"{name}.json*"))
    return path.name, path.read_bytes()


def test_aborted_frames_get_no_synthetic_result_by_default() -> None:
    name, data = _case("08_pi-aborted-toolcall-then-user")
    for policy in ("synthesize", "discard", "native", "openclaw"):
        result = analyze(data, name, policy)
        assert [str(f.kind) for f in result.faults] == ["aborted_frame"]
        assert result.repaired == data


def test_openmaic_answers_the_call_of_an_aborted_frame() -> None:
    name, data = _case("08_pi-aborted-toolcall-then-user")
    lines = analyze(data, name, "openmaic").repaired.splitlines()
    assert len(lines) == len(data.splitlines()) + 1
    receipt = json.loads(lines[4])
    assert receipt["parentId"] == "e0000003"
    assert receipt["message"]["toolCallId"] == "toolu_syn_mig_01"
    assert receipt["message"]["details"] == {"ok": False, "error": "interrupted"}
    assert receipt["message"]["content"][0]["text"] == INTERRUPTED_TEXT
    assert json.loads(lines[5])["parentId"] == receipt["id"]


def test_openmaic_keeps_an_unknown_result_where_openclaw_drops_it() -> None:
    name, data = _case("10_openclaw-displaced-dup-orphan-results")
    kept = analyze(data, name, "openmaic").repaired
    dropped = analyze(data, name, "openclaw").repaired
    assert b"call_syn_old_99" in kept
    assert b"call_syn_old_99" not in dropped


def _tail_call_session() -> bytes:
    script = sessions.Script([sessions.Turn(["c1"], ["ok"]), sessions.Turn(["c2"], ["missing"])])
    lines = sessions.openclaw(script).splitlines(keepends=True)
    # Cut the session right after the unanswered call, as a live agent leaves it.
    cut = next(k for k, line in enumerate(lines) if b'"c2"' in line)
    return b"".join(lines[: cut + 1])


def test_a_live_sessions_tail_call_is_pending_and_left_alone() -> None:
    data = _tail_call_session()
    result = analyze(data, "o.jsonl", now=1_000_030.0, last_write=1_000_000.0, grace=60)
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [("pending_result", "c2")]
    assert not result.plan


def test_a_tail_call_becomes_missing_once_the_grace_passes() -> None:
    data = _tail_call_session()
    result = analyze(data, "o.jsonl", now=1_000_090.0, last_write=1_000_000.0, grace=60)
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [("missing_result", "c2")]
    assert analyze(data, "o.jsonl").faults == result.faults


def _cut_off_call_session(answered: bool) -> bytes:
    call = {"type": "toolCall", "id": "t1", "name": "exec", "partialJson": '{"cmd":"ru'}
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "message": {"role": "user", "content": "go"},
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}, call],
                "stopReason": "toolUse",
            },
        },
    ]
    if answered:
        lines.append(
            {
                "type": "message",
                "id": "a3",
                "parentId": "a2",
                "message": {
                    "role": "toolResult",
                    "toolCallId": "t1",
                    "toolName": "exec",
                    "content": [],
                    "isError": True,
                },
            }
        )
    lines.append(
        {
            "type": "message",
            "id": "a4",
            "parentId": lines[-1]["id"],
            "message": {"role": "user", "content": "and?"},
        }
    )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_a_call_cut_off_mid_stream_with_no_result_is_dropped() -> None:
    data = _cut_off_call_session(answered=False)
    result = analyze(data, "o.jsonl")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("malformed_call", "t1"),
        ("missing_result", "t1"),
    ]
    out = [json.loads(line) for line in result.repaired.splitlines()]
    assert [line["id"] for line in out] == ["s", "a1", "a2", "a4"]
    assert out[2]["message"]["content"] == [{"type": "text", "text": "ok"}]
    assert out[3]["parentId"] == "a2"
    assert not analyze(result.repaired, "o.jsonl").plan


def test_a_call_cut_off_mid_stream_that_a_result_answers_is_kept() -> None:
    # pi replays it (`input: arguments ?? {}`) with its result, so the repair keeps both.
    data = _cut_off_call_session(answered=True)
    result = analyze(data, "o.jsonl")
    assert result.faults == []
    assert result.repaired == data


def test_a_completed_call_with_a_leftover_partial_json_is_kept_with_its_result() -> None:
    # pi leaves its streaming buffer on calls that completed (issue 12): pi replays
    # them and their results, so a repair must not drop them as malformed.
    call = {
        "type": "toolCall",
        "id": "t1",
        "name": "read",
        "arguments": {"path": "a.py"},
        "partialJson": '{"path": "a.py"}',
    }
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "message": {"role": "user", "content": "go"},
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "message": {"role": "assistant", "content": [call], "stopReason": "toolUse"},
        },
        {
            "type": "message",
            "id": "a3",
            "parentId": "a2",
            "message": {
                "role": "toolResult",
                "toolCallId": "t1",
                "toolName": "read",
                "content": [{"type": "text", "text": "x = 1"}],
                "isError": False,
            },
        },
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    result = analyze(data, "o.jsonl")
    assert result.faults == []
    assert result.repaired == data


def test_a_compactions_first_kept_entry_dropped_by_a_repair_moves_to_the_next_entry() -> None:
    # pi keeps nothing before a compaction whose firstKeptEntryId it cannot find,
    # so dropping that entry (an orphaned result) must re-point the compaction.
    def entry(eid: str, parent: str | None, message: dict[str, object]) -> dict[str, object]:
        return {"type": "message", "id": eid, "parentId": parent, "message": message}

    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        entry("a1", None, {"role": "user", "content": "profile it"}),
        entry(
            "a2",
            "a1",
            {
                "role": "toolResult",
                "toolCallId": "gone",
                "toolName": "bash",
                "content": [{"type": "text", "text": "120 s"}],
                "isError": False,
            },
        ),
        entry("a3", "a2", {"role": "assistant", "content": [{"type": "text", "text": "slow"}]}),
        {
            "type": "compaction",
            "id": "a4",
            "parentId": "a3",
            "summary": "s",
            "firstKeptEntryId": "a2",
        },
        entry("a5", "a4", {"role": "user", "content": "speed it up"}),
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    result = analyze(data, "o.jsonl")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [("orphaned_result", "gone")]
    out = [json.loads(line) for line in result.repaired.splitlines()]
    assert [line["id"] for line in out] == ["s", "a1", "a3", "a4", "a5"]
    assert out[3]["firstKeptEntryId"] == "a3"
    assert not analyze(result.repaired, "o.jsonl").plan


def test_results_an_earlier_repair_made_are_recognised() -> None:
    data = (SAMPLES / "formats" / "openclaw.jsonl").read_bytes()
    # The default answers in OpenClaw's own words in OpenClaw's own session file.
    pairs = [("synthesize", "repair (OpenClaw)"), ("openclaw", "repair (OpenClaw)")]
    for policy, system in pairs:
        repaired = analyze(data, "openclaw.jsonl", policy).repaired
        again = analyze(repaired, "openclaw.jsonl", policy)
        assert [str(f.kind) for f in again.faults] == ["existing_synthetic"]
        assert system in again.faults[0].detail
        assert not again.plan


def _pi_session(*messages: dict) -> bytes:
    lines: list[dict] = [{"type": "session", "version": 3, "id": "s", "cwd": "/w"}]
    parent = None
    for k, message in enumerate(messages, 1):
        entry_id = f"e{k:07d}"
        lines.append({"type": "message", "id": entry_id, "parentId": parent, "message": message})
        parent = entry_id
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _calls(*ids: str, stop: str = "toolUse") -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": i, "name": "exec", "arguments": {}} for i in ids],
        "stopReason": stop,
    }


def _result(call_id: str) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "exec",
        "content": [{"type": "text", "text": "real " + call_id}],
        "isError": False,
    }


ABORTED_TAIL = {
    "role": "assistant",
    "content": [],
    "stopReason": "aborted",
    "errorMessage": "Request was aborted",
}


def _messages(data: bytes) -> list[dict]:
    return [json.loads(line)["message"] for line in data.splitlines()[1:]]


def test_openmaic_moves_a_late_result_back_before_the_aborted_frame() -> None:
    data = _pi_session(
        {"role": "user", "content": "go"},
        _calls("fast", "slow"),
        _result("fast"),
        ABORTED_TAIL,
        _result("slow"),
    )
    result = analyze(data, "o.jsonl", "openmaic")
    out = _messages(result.repaired)
    assert [m.get("toolCallId") or m["role"] for m in out] == ["user", "assistant", "fast", "slow"]
    assert not [op for op in result.plan.ops if op.kind.value == "insert_result"]
    assert {str(f.kind) for f in analyze(result.repaired, "o.jsonl", "openmaic").faults} <= {
        "existing_synthetic"
    }


def test_openmaic_synthesizes_only_for_calls_really_missing() -> None:
    data = _pi_session(
        {"role": "user", "content": "go"},
        _calls("done", "late", "missing"),
        _result("done"),
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "interrupted tail"}],
            "stopReason": "aborted",
        },
        _result("late"),
    )
    result = analyze(data, "o.jsonl", "openmaic")
    out = _messages(result.repaired)
    assert [m.get("toolCallId") for m in out[2:]] == ["done", "late", "missing"]
    assert out[4]["isError"] is True
    assert [op.tool_call_id for op in result.plan.ops if op.kind.value == "insert_result"] == [
        "missing"
    ]


def test_openclaw_replaces_a_result_beyond_the_next_assistant_with_a_synthetic_one() -> None:
    data = _pi_session(
        {"role": "user", "content": "go"},
        _calls("c1"),
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "still waiting"}],
            "stopReason": "stop",
        },
        _result("c1"),
        {"role": "user", "content": "and?"},
    )
    openclaw = _messages(analyze(data, "o.jsonl", "openclaw").repaired)
    assert [m["role"] for m in openclaw] == ["user", "assistant", "toolResult", "assistant", "user"]
    assert openclaw[2]["content"][0]["text"] == "[openclaw] " + OPENCLAW_SENTENCE
    assert b"real c1" not in analyze(data, "o.jsonl", "openclaw").repaired
    moved = _messages(analyze(data, "o.jsonl", "synthesize").repaired)
    assert moved[2]["content"][0]["text"] == "real c1"


def test_an_id_anthropic_refuses_is_renamed_in_the_call_and_its_result() -> None:
    data = sessions.claude_code(sessions.Script([sessions.Turn(["functions.exec:0"], ["ok"])]))
    result = analyze(data, "c.jsonl")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("malformed_call", "functions.exec:0")
    ]
    assert "String should match pattern" in result.faults[0].error
    assert [(str(op.kind), op.record, op.text) for op in result.plan.ops] == [
        ("rename_id", 3, "functions_exec_0"),
        ("rename_id", 4, "functions_exec_0"),
    ]
    assert result.plan.ops[0].policy_row == "synthesize: malformed_call -> rename"
    lines = [json.loads(line) for line in result.repaired.splitlines()]
    assert lines[3]["message"]["content"][0]["id"] == "functions_exec_0"
    assert lines[4]["message"]["content"][0]["tool_use_id"] == "functions_exec_0"
    assert b'"functions.exec:0"' not in result.repaired
    assert not analyze(result.repaired, "c.jsonl").plan
