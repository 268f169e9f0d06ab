"""The hard shapes from public bug reports: each repaired as its provider and agent need it.

Every case is a native file written here in its real layout. The property test
at the end builds sessions of every shape in six formats and checks what a
user checks: the repaired file breaks no rule of its provider, keeps every
text it held, and a second repair finds nothing to do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcripts.core.branch import live_path
from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.model import FaultKind, OpKind, ToolCall
from transcripts.core.validate import validate
from transcripts.engine import Analysis, analyze
from transcripts.formats import load
from transcripts.formats.openclaw import pi_anthropic_id


def _check(data: bytes, name: str, policy: str = "synthesize") -> Analysis:
    """Return the analysis of `data`, having checked its repair is valid and final."""
    result = analyze(data, name, policy)
    assert result.error is None, result.error
    out = load(result.repaired, name, result.format)
    assert validate(out) == []
    again = analyze(result.repaired, name, policy, result.format)
    assert not again.plan, again.plan.ops
    return result


def _faults(result: Analysis) -> list[tuple[str, str | None, int]]:
    return [(str(f.kind), f.tool_call_id, f.record) for f in result.faults]


def _ops(result: Analysis) -> list[tuple[str, int | None]]:
    return [(str(op.kind), op.record) for op in result.plan.ops]


def _jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _pi(*messages: dict) -> bytes:
    lines: list[dict] = [
        {
            "type": "session",
            "version": 3,
            "id": "s1",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        }
    ]
    parent = None
    for k, message in enumerate(messages, 1):
        entry = f"e{k:07d}"
        lines.append(
            {
                "type": "message",
                "id": entry,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:00Z",
                "message": message,
            }
        )
        parent = entry
    return _jsonl(lines)


def _cc_line(uuid: str, parent: str | None, role: str, content: object, mid: str = "") -> dict:
    message: dict = {"role": role, "content": content}
    if mid:
        message = {"id": mid, "type": "message", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "cwd": "/w",
        "type": role,
        "message": message,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }


# Content after a tool call (Anthropic: `tool_use` must end the message).


def test_content_after_a_call_becomes_its_own_message_after_the_results() -> None:
    messages = [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it first."},
                {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a.py"}},
                {"type": "text", "text": "Then I will edit it."},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "def f(): pass"},
                {"type": "text", "text": "go on"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]
    data = json.dumps({"model": "claude", "messages": messages}, indent=2).encode()
    result = _check(data, "a.json")
    assert _faults(result) == [("content_after_call", "toolu_01", 1)]
    assert _ops(result) == [("split_after_call", 1), ("split_reply", 2)]
    out = json.loads(result.repaired)["messages"]
    assert [m["role"] for m in out] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [b["type"] for b in out[1]["content"]] == ["text", "tool_use"]
    assert out[2]["content"] == [messages[2]["content"][0]]
    assert out[3]["content"] == [{"type": "text", "text": "Then I will edit it."}]
    assert out[4]["content"] == [{"type": "text", "text": "go on"}]


def test_content_after_an_unanswered_call_follows_its_synthetic_result() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_02", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "text", "text": "Listing."},
            ],
        },
        {"role": "user", "content": "stop"},
    ]
    result = _check(json.dumps(messages).encode(), "a.json")
    out = json.loads(result.repaired)
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert out[2]["content"][0]["tool_use_id"] == "toolu_02"
    assert out[3]["content"] == [{"type": "text", "text": "Listing."}]
    assert out[4]["content"] == [{"type": "text", "text": "stop"}]


def test_content_after_a_call_is_dropped_only_by_a_policy_that_says_so() -> None:
    from transcripts.core.policy import custom

    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_03", "name": "bash", "input": {}},
                {"type": "text", "text": "chatter"},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_03", "content": "x"}],
        },
    ]
    data = json.dumps(messages).encode()
    terse = custom("terse", {"content_after_call": "drop"}, None)
    result = analyze(data, "a.json", terse)
    assert _ops(result) == [("drop_content", 1)]
    assert result.plan.ops[0].policy_row == "terse: content_after_call -> drop"
    assert b"chatter" not in result.repaired
    assert b"chatter" in analyze(data, "a.json").repaired


def test_vercel_ai_content_after_a_call_moves_after_the_tool_message() -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "call_w", "toolName": "weather", "input": {}},
                {"type": "text", "text": "Checking the weather."},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "call_w",
                    "toolName": "weather",
                    "output": {"type": "text", "value": "sunny"},
                }
            ],
        },
    ]
    result = _check(json.dumps(messages).encode(), "v.json")
    out = json.loads(result.repaired)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "assistant"]
    assert out[3]["content"] == [{"type": "text", "text": "Checking the weather."}]


def test_a_pi_split_gets_an_entry_id_of_its_own_and_the_chain_follows_it() -> None:
    data = _pi(
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "t1", "name": "read", "arguments": {}},
                {"type": "text", "text": "trailing"},
            ],
            "stopReason": "toolUse",
        },
        {
            "role": "toolResult",
            "toolCallId": "t1",
            "toolName": "read",
            "content": [],
            "isError": False,
        },
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    )
    result = _check(data, "o.jsonl")
    lines = [json.loads(line) for line in result.repaired.splitlines()]
    assert [line["id"] for line in lines[:4]] == ["s1", "e0000001", "e0000002", "e0000003"]
    split = lines[4]
    assert split["parentId"] == "e0000003"
    assert split["message"]["content"] == [{"type": "text", "text": "trailing"}]
    assert lines[5]["parentId"] == split["id"] != "e0000002"


# Tool call ids the provider refuses.


def test_two_calls_sharing_an_id_in_an_openai_chat_message_are_told_apart() -> None:
    messages = [
        {"role": "user", "content": "edit both"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.edit:22",
                    "type": "function",
                    "function": {"name": "edit", "arguments": '{"f":"a"}'},
                },
                {
                    "id": "functions.edit:22",
                    "type": "function",
                    "function": {"name": "edit", "arguments": '{"f":"b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "functions.edit:22", "content": "edited a"},
        {"role": "tool", "tool_call_id": "functions.edit:22", "content": "edited b"},
    ]
    result = _check(json.dumps(messages).encode(), "c.json")
    assert _faults(result) == [("duplicate_call_id", "functions.edit:22", 1)]
    assert [(str(op.kind), op.record, op.text) for op in result.plan.ops] == [
        ("rename_id", 1, "functions.edit:22-2"),
        ("rename_id", 3, "functions.edit:22-2"),
    ]
    out = json.loads(result.repaired)
    assert [c["id"] for c in out[1]["tool_calls"]] == ["functions.edit:22", "functions.edit:22-2"]
    # Pairing by occurrence: the second result answers the second call.
    assert [(m["tool_call_id"], m["content"]) for m in out[2:]] == [
        ("functions.edit:22", "edited a"),
        ("functions.edit:22-2", "edited b"),
    ]


def test_an_openai_id_carried_back_to_claude_is_renamed_in_call_and_result() -> None:
    data = _pi(
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "call_x|fc_y", "name": "ls", "arguments": {}}],
            "stopReason": "toolUse",
            "api": "anthropic-messages",
        },
        {
            "role": "toolResult",
            "toolCallId": "call_x|fc_y",
            "toolName": "ls",
            "content": [{"type": "text", "text": "a b"}],
            "isError": False,
        },
    )
    result = _check(data, "o.jsonl")
    assert _faults(result) == [("malformed_call", "call_x|fc_y", 2)]
    lines = [json.loads(line) for line in result.repaired.splitlines()]
    assert lines[2]["message"]["content"][0]["id"] == "call_x_fc_y"
    assert lines[3]["message"]["toolCallId"] == "call_x_fc_y"
    assert lines[3]["message"]["content"] == [{"type": "text", "text": "a b"}]


def test_renaming_many_calls_compares_each_call_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls to rename are gathered by position: a list's `in` compared every pair (O(n²)).

    An OpenClaw session on an OpenAI model carries `call_…|fc_…` ids, which an
    Anthropic model refuses: every call of a long session is renamed. 600 here.
    """
    turns = []
    for k in range(600):
        call_id = f"call_{k}|fc_{k}"
        turns.append(
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": call_id, "name": "ls", "arguments": {}}],
                "stopReason": "toolUse",
                "api": "anthropic-messages",
            }
        )
        turns.append(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "ls",
                "content": [{"type": "text", "text": str(k)}],
                "isError": False,
            }
        )
    data = _pi({"role": "user", "content": [{"type": "text", "text": "go"}]}, *turns)
    compared = 0
    original = ToolCall.__eq__

    def counted(self: ToolCall, other: object) -> bool:
        nonlocal compared
        compared += 1
        return original(self, other)

    monkeypatch.setattr(ToolCall, "__eq__", counted)
    result = analyze(data, "o.jsonl")
    assert [op.kind for op in result.plan.ops].count(OpKind.RENAME_ID) == 1200  # call, result
    assert compared < 10 * 600


def test_distinct_anthropic_calls_sharing_an_id_keep_both_exchanges() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"p": 1}},
                {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"p": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "one"},
            ],
        },
    ]
    result = _check(json.dumps(messages).encode(), "a.json")
    kinds = {str(f.kind) for f in result.faults}
    assert kinds == {"duplicate_call_id", "missing_result"}
    out = json.loads(result.repaired)
    assert [b["id"] for b in out[1]["content"]] == ["toolu_9", "toolu_9-2"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["toolu_9", "toolu_9-2"]
    assert out[2]["content"][0]["content"] == "one"


# Errored or aborted frames (pi-ai transform-messages skips them when it replays).


def test_an_errored_frame_with_partial_arguments_and_its_receipt_never_reach_the_model() -> None:
    data = _pi(
        {"role": "user", "content": [{"type": "text", "text": "write it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Writing."},
                {
                    "type": "toolCall",
                    "id": "toolu_w",
                    "name": "write",
                    "arguments": {},
                    "partialJson": '{"path": "a.p',
                },
            ],
            "stopReason": "error",
            "errorMessage": "stream cut",
            "api": "anthropic-messages",
        },
        {
            "role": "toolResult",
            "toolCallId": "toolu_w",
            "toolName": "write",
            "content": [{"type": "text", "text": "[openclaw] " + OPENCLAW_SENTENCE}],
            "isError": True,
        },
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    )
    result = _check(data, "o.jsonl")
    assert _faults(result) == [
        ("aborted_frame", "toolu_w", 2),
        ("existing_synthetic", "toolu_w", 3),
        ("orphaned_result", "toolu_w", 3),
    ]
    assert _ops(result) == [("drop_result", 3)]
    lines = [json.loads(line) for line in result.repaired.splitlines()]
    assert [line["id"] for line in lines] == ["s1", "e0000001", "e0000002", "e0000004"]
    assert lines[3]["parentId"] == "e0000002"


# Malformed lines.


def test_a_malformed_line_is_dropped_by_discard_and_kept_by_default() -> None:
    good = _pi({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    data = good + b'{"type": "message", "id": "e00000'
    kept = analyze(data, "o.jsonl")
    [fault] = kept.faults
    assert fault.kind is FaultKind.MALFORMED_RECORD
    assert "truncated last line" in fault.detail
    assert "Skip malformed lines" in fault.detail
    assert kept.repaired == data
    dropped = analyze(data, "o.jsonl", "discard")
    assert _ops(dropped) == [("drop_record", 2)]
    assert dropped.repaired == good
    assert dropped.plan.ops[0].policy_row == "discard: malformed_record -> drop"


# Responses: reasoning without its item, and requests continuing a stored response.


def test_a_reasoning_item_without_its_following_item_is_dropped() -> None:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]
    result = _check(json.dumps(items).encode(), "r.json")
    assert _faults(result) == [("orphaned_reasoning", None, 1)]
    assert "Item of type 'reasoning' was provided without its required following item" in (
        result.faults[0].error
    )
    assert [i["type"] for i in json.loads(result.repaired)] == ["message", "message"]


def test_outputs_of_a_stored_response_are_valid_when_the_request_continues_it() -> None:
    body = {
        "model": "gpt-5",
        "previous_response_id": "resp_123",
        "input": [{"type": "function_call_output", "call_id": "call_srv", "output": "42"}],
    }
    data = json.dumps(body).encode()
    result = _check(data, "r.json")
    assert result.faults == []
    assert result.repaired == data
    alone = dict(body)
    del alone["previous_response_id"]
    assert _faults(analyze(json.dumps(alone).encode(), "r.json")) == [
        ("orphaned_result", "call_srv", 0)
    ]


# Bedrock: parallel results split over two user turns.


def test_bedrock_results_split_over_two_user_turns_are_merged_into_one() -> None:
    messages = [
        {"role": "user", "content": [{"text": "two lookups"}]},
        {
            "role": "assistant",
            "content": [
                {"toolUse": {"toolUseId": "tooluse_a", "name": "get", "input": {}}},
                {"toolUse": {"toolUseId": "tooluse_b", "name": "get", "input": {}}},
            ],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "tooluse_a", "content": [{"text": "A"}]}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "tooluse_b", "content": [{"text": "B"}]}}],
        },
    ]
    data = json.dumps({"messages": messages}).encode()
    before = validate(load(data, "b.json"))
    assert [v.error for v in before] == [
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "tooluse_b. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message.",
        "messages.3.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        "tooluse_b. Each `tool_result` block must have a corresponding `tool_use` block in the "
        "previous message.",
    ]
    result = _check(data, "b.json")
    assert _faults(result) == [("displaced_result", "tooluse_b", 3)]
    assert result.faults[0].error.startswith("Expected toolResult blocks at messages.2.content")
    out = json.loads(result.repaired)["messages"]
    assert len(out) == 3
    assert [b["toolResult"]["toolUseId"] for b in out[2]["content"]] == ["tooluse_a", "tooluse_b"]


# Gemini replays and Codex custom tool calls.


def test_gemini_responses_replayed_twice_in_one_content_keep_the_first() -> None:
    for with_ids in (True, False):

        def call(name: str, k: str, with_ids: bool = with_ids) -> dict:
            return {"id": k, "name": name, "args": {}} if with_ids else {"name": name, "args": {}}

        def response(name: str, k: str, text: str, with_ids: bool = with_ids) -> dict:
            body = {"name": name, "response": {"output": text}}
            return {"functionResponse": {"id": k, **body} if with_ids else body}

        contents = [
            {"role": "user", "parts": [{"text": "look"}]},
            {
                "role": "model",
                "parts": [{"functionCall": call("read", "f1")}, {"functionCall": call("ls", "f2")}],
            },
            {
                "role": "user",
                "parts": [
                    response("read", "f1", "a"),
                    response("ls", "f2", "b"),
                    response("read", "f1", "a"),
                    response("ls", "f2", "b"),
                ],
            },
        ]
        result = _check(json.dumps({"contents": contents}, indent=2).encode(), "g.json")
        assert [str(f.kind) for f in result.faults] == ["duplicate_result", "duplicate_result"]
        parts = json.loads(result.repaired)["contents"][2]["parts"]
        assert parts == contents[2]["parts"][:2]


def test_a_codex_custom_tool_call_gets_a_custom_tool_call_output() -> None:
    lines = [
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "type": "session_meta",
            "payload": {"id": "x", "cwd": "/w"},
        },
        {
            "timestamp": "2026-01-01T00:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "call_id": "call_p",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
        },
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "type": "event_msg",
            "payload": {"type": "turn_aborted", "reason": "interrupted"},
        },
    ]
    result = _check(_jsonl(lines), "rollout-1.jsonl")
    out = json.loads(result.repaired.splitlines()[2])
    assert out["payload"] == {
        "type": "custom_tool_call_output",
        "call_id": "call_p",
        "output": "aborted",
    }


def test_a_function_call_output_does_not_answer_a_custom_tool_call() -> None:
    # Codex's normalize.rs pairs a custom call with a custom output only: it answers
    # the call "aborted" and drops the other output as an orphan. So does the repair.
    lines = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x"}},
        {
            "timestamp": "2026-01-01T00:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "call_id": "call_q",
                "name": "apply_patch",
                "input": "p",
            },
        },
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "call_q", "output": "done"},
        },
    ]
    result = _check(_jsonl(lines), "rollout-2.jsonl")
    assert _faults(result) == [("missing_result", "call_q", 1), ("orphaned_result", "call_q", 2)]
    out = [json.loads(line)["payload"] for line in result.repaired.splitlines()]
    assert len(out) == 3
    assert out[1]["type"] == "custom_tool_call"
    assert out[2] == {"type": "custom_tool_call_output", "call_id": "call_q", "output": "aborted"}


# False positives.


def test_vercel_ai_approval_at_the_end_is_resume_input_not_a_missing_result() -> None:
    messages = [
        {"role": "user", "content": "delete tmp"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "c1", "toolName": "rm", "input": {"p": "/tmp"}},
                {"type": "tool-approval-request", "approvalId": "ap1", "toolCallId": "c1"},
            ],
        },
        {
            "role": "tool",
            "content": [{"type": "tool-approval-response", "approvalId": "ap1", "approved": False}],
        },
    ]
    data = json.dumps(messages).encode()
    assert analyze(data, "v.json").faults == []
    later = json.dumps([*messages, {"role": "user", "content": "well?"}]).encode()
    assert _faults(_check(later, "v.json")) == [("missing_result", "c1", 1)]


def test_claude_code_parallel_results_parented_on_their_own_calls_are_not_missing() -> None:
    lines = [
        _cc_line("u0", None, "user", "read both"),
        _cc_line(
            "a1",
            "u0",
            "assistant",
            [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
            "msg_1",
        ),
        _cc_line(
            "a2",
            "a1",
            "assistant",
            [{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {}}],
            "msg_1",
        ),
        _cc_line(
            "r1",
            "a1",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"}],
        ),
        _cc_line(
            "r2",
            "a2",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "two"}],
        ),
        _cc_line("a3", "r2", "assistant", [{"type": "text", "text": "both read"}], "msg_2"),
    ]
    data = _jsonl(lines)
    result = _check(data, "c.jsonl")
    assert result.faults == []
    assert result.repaired == data
    assert result.transcript is not None
    assert live_path(result.transcript) == [0, 1, 2, 3, 4, 5]


def test_a_result_of_a_rewound_branch_is_not_re_attached() -> None:
    call = [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]
    lines = [
        _cc_line("u0", None, "user", "read"),
        _cc_line("a1", "u0", "assistant", call, "msg_1"),
        _cc_line(
            "old",
            "a1",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "v1"}],
        ),
        _cc_line(
            "new",
            "a1",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "v2"}],
        ),
        _cc_line("a2", "new", "assistant", [{"type": "text", "text": "read"}], "msg_2"),
    ]
    result = _check(_jsonl(lines), "c.jsonl")
    assert result.faults == []
    assert result.transcript is not None
    assert live_path(result.transcript) == [0, 1, 3, 4]


# Policies.


def test_the_default_answers_in_the_agents_own_words_and_a_plain_list_gets_the_receipt() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}
    anthropic = json.dumps(
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]}]
    )
    [op] = analyze(anthropic.encode(), "a.json").plan.ops
    assert op.text.startswith('{"ok":false,"error":"interrupted"')
    lines = [_cc_line("u0", None, "user", "go"), _cc_line("a1", "u0", "assistant", [call], "m")]
    [op] = analyze(_jsonl(lines), "c.jsonl").plan.ops
    assert op.text == "[Request interrupted by user for tool use]"


def test_a_workspace_policy_refuses_an_action_its_kind_cannot_take() -> None:
    from transcripts.core.policy import custom

    try:
        custom("mine", {"orphaned_result": "synthesize"}, None)
    except ValueError as exc:
        assert str(exc) == (
            "orphaned_result cannot take the action synthesize; it can take drop, flag, keep"
        )
    else:
        raise AssertionError("the action was accepted")


# The property across formats.


@dataclass
class Shape:
    """One assistant turn: its calls, which are answered, and what surrounds them."""

    calls: list[str]
    answered: list[bool]
    trailing: str | None  # assistant text after the calls
    reply: str | None  # user text after the results
    words: list[str] = field(default_factory=list)


@st.composite
def shapes(draw: st.DrawFn, bad_ids: bool) -> list[Shape]:
    out = []
    counter = 0
    for t in range(draw(st.integers(1, 4))):
        calls: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            counter += 1
            kind = draw(
                st.sampled_from(["plain", "repeat", "bad"] if bad_ids else ["plain", "repeat"])
            )
            if kind == "repeat" and calls:
                calls.append(calls[-1])
            elif kind == "bad":
                calls.append(f"call_{counter}|fc_{counter}")
            else:
                calls.append(f"toolu_{counter:02d}")
        answered = [draw(st.booleans()) for _ in calls]
        trailing = f"trailing{t}" if draw(st.booleans()) else None
        reply = f"reply{t}" if draw(st.booleans()) else None
        out.append(Shape(calls, answered, trailing, reply))
    return out


def _anthropic(turns: list[Shape]) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "start"}]
    for t, turn in enumerate(turns):
        blocks: list[dict] = [{"type": "text", "text": f"lead{t}"}]
        blocks += [
            {"type": "tool_use", "id": cid, "name": "run", "input": {"n": f"{t}.{k}"}}
            for k, cid in enumerate(turn.calls)
        ]
        if turn.trailing:
            blocks.append({"type": "text", "text": turn.trailing})
        messages.append({"role": "assistant", "content": blocks})
        user: list[dict] = [
            {"type": "tool_result", "tool_use_id": cid, "content": f"out{t}.{k}"}
            for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True))
            if ok
        ]
        if turn.reply:
            user.append({"type": "text", "text": turn.reply})
        if user:
            messages.append({"role": "user", "content": user})
        elif t + 1 < len(turns):
            messages.append({"role": "user", "content": f"prompt{t}"})
    return json.dumps({"messages": messages}, indent=2).encode()


def _bedrock(turns: list[Shape]) -> bytes:
    messages: list[dict] = [{"role": "user", "content": [{"text": "start"}]}]
    for t, turn in enumerate(turns):
        blocks: list[dict] = [{"text": f"lead{t}"}]
        blocks += [
            {"toolUse": {"toolUseId": cid, "name": "run", "input": {"n": f"{t}.{k}"}}}
            for k, cid in enumerate(turn.calls)
        ]
        if turn.trailing:
            blocks.append({"text": turn.trailing})
        messages.append({"role": "assistant", "content": blocks})
        answers = [
            {"toolResult": {"toolUseId": cid, "content": [{"text": f"out{t}.{k}"}]}}
            for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True))
            if ok
        ]
        # Parallel results split over two user turns, as a runtime that wrote them apart.
        for half in (answers[:1], answers[1:]):
            if half:
                messages.append({"role": "user", "content": half})
        if turn.reply:
            messages.append({"role": "user", "content": [{"text": turn.reply}]})
        elif not answers and t + 1 < len(turns):
            messages.append({"role": "user", "content": [{"text": f"prompt{t}"}]})
    return json.dumps({"messages": messages}).encode()


def _vercel(turns: list[Shape]) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "start"}]
    for t, turn in enumerate(turns):
        parts: list[dict] = [{"type": "text", "text": f"lead{t}"}]
        parts += [
            {"type": "tool-call", "toolCallId": cid, "toolName": "run", "input": {"n": f"{t}.{k}"}}
            for k, cid in enumerate(turn.calls)
        ]
        if turn.trailing:
            parts.append({"type": "text", "text": turn.trailing})
        messages.append({"role": "assistant", "content": parts})
        results = [
            {
                "type": "tool-result",
                "toolCallId": cid,
                "toolName": "run",
                "output": {"type": "text", "value": f"out{t}.{k}"},
            }
            for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True))
            if ok
        ]
        if results:
            messages.append({"role": "tool", "content": results})
        if turn.reply:
            messages.append({"role": "user", "content": turn.reply})
    return json.dumps(messages).encode()


def _chat(turns: list[Shape]) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "start"}]
    for t, turn in enumerate(turns):
        calls = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "run", "arguments": json.dumps({"n": f"{t}.{k}"})},
            }
            for k, cid in enumerate(turn.calls)
        ]
        messages.append({"role": "assistant", "content": f"lead{t}", "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": cid, "content": f"out{t}.{k}"}
            for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True))
            if ok
        ]
        if turn.reply:
            messages.append({"role": "user", "content": turn.reply})
    return json.dumps(messages).encode()


def _openclaw(turns: list[Shape]) -> bytes:
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "start"}]}]
    for t, turn in enumerate(turns):
        blocks: list[dict] = [{"type": "text", "text": f"lead{t}"}]
        blocks += [
            {"type": "toolCall", "id": cid, "name": "run", "arguments": {"n": f"{t}.{k}"}}
            for k, cid in enumerate(turn.calls)
        ]
        if turn.trailing:
            blocks.append({"type": "text", "text": turn.trailing})
        messages.append(
            {
                "role": "assistant",
                "content": blocks,
                "stopReason": "toolUse",
                "api": "anthropic-messages",
            }
        )
        messages += [
            {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": "run",
                "content": [{"type": "text", "text": f"out{t}.{k}"}],
                "isError": False,
            }
            for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True))
            if ok
        ]
        if turn.reply:
            messages.append({"role": "user", "content": [{"type": "text", "text": turn.reply}]})
    return _pi(*messages)


def _claude_code(turns: list[Shape]) -> bytes:
    lines = [_cc_line("u-0", None, "user", "start")]
    for t, turn in enumerate(turns):
        mid = f"msg_{t}"
        blocks: list[dict] = [{"type": "text", "text": f"lead{t}"}]
        blocks += [
            {"type": "tool_use", "id": cid, "name": "Bash", "input": {"n": f"{t}.{k}"}}
            for k, cid in enumerate(turn.calls)
        ]
        if turn.trailing:
            blocks.append({"type": "text", "text": turn.trailing})
        # One line per content block of the API message, chained (formats.md §4).
        for k, block in enumerate(blocks):
            lines.append(_cc_line(f"a-{t}-{k}", lines[-1]["uuid"], "assistant", [block], mid))
        for k, (cid, ok) in enumerate(zip(turn.calls, turn.answered, strict=True)):
            if ok:
                result = [{"type": "tool_result", "tool_use_id": cid, "content": f"out{t}.{k}"}]
                lines.append(_cc_line(f"r-{t}-{k}", lines[-1]["uuid"], "user", result))
        if turn.reply:
            lines.append(_cc_line(f"p-{t}", lines[-1]["uuid"], "user", turn.reply))
    return _jsonl(lines)


BUILDERS = {
    "a.json": (_anthropic, True),
    "b.json": (_bedrock, True),
    "v.json": (_vercel, False),
    "s.json": (_chat, False),
    "o.jsonl": (_openclaw, True),
    "c.jsonl": (_claude_code, True),
}


def _texts(turns: list[Shape]) -> list[str]:
    words = ["start"]
    for t, turn in enumerate(turns):
        words.append(f"lead{t}")
        words += [f"out{t}.{k}" for k, ok in enumerate(turn.answered) if ok]
        words += [w for w in (turn.trailing, turn.reply) if w]
    return words


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(BUILDERS)), data=st.data())
def test_every_shape_repairs_validly_keeps_every_text_and_is_final(
    name: str, data: st.DataObject
) -> None:
    build, bad_ids = BUILDERS[name]
    turns = data.draw(shapes(bad_ids))
    if build is _chat:
        for turn in turns:
            turn.trailing = None  # Chat Completions content always comes before the calls
    raw = build(turns)
    result = _check(raw, name)
    for word in _texts(turns):
        assert f'"{word}"'.encode() in result.repaired or word.encode() in result.repaired, word
    kinds = {op.kind for op in result.plan.ops}
    assert OpKind.DROP_CALL not in kinds and OpKind.DROP_CONTENT not in kinds


def test_a_call_id_ending_in_a_newline_is_outside_anthropics_pattern() -> None:
    """Anthropic matches the whole id: `^[a-zA-Z0-9_-]+$` takes no trailing newline.

    Python's `$` matches before a final newline, so a `re.match` with that
    pattern passed "toolu_01\\n"; the provider refuses it.
    """
    call_id = "toolu_01Ab\n"
    data = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": call_id, "name": "ls", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "a"}],
                },
            ],
        }
    ).encode()
    result = _check(data, "request.json")
    assert _faults(result) == [("malformed_call", call_id, 1)]
    repaired = json.loads(result.repaired)["messages"]
    assert repaired[1]["content"][0]["id"] == "toolu_01Ab_"
    assert repaired[2]["content"][0]["tool_use_id"] == "toolu_01Ab_"


def test_a_record_without_an_id_is_no_parent_when_a_pi_branch_is_relinked() -> None:
    """A result written with `"id": null` is linked in; the record after it takes the id before.

    The repair linked the next record to that result's id, written `""`: a
    parent no entry holds, so pi's walk from the leaf (session-manager.js
    `buildSessionContext`) stopped there and a second reading found five
    more orphaned results and five missing ones. Found by test_outcome's
    mutated samples in a long run.
    """
    path = Path(__file__).parents[1] / "formats" / "fixtures"
    lines = [
        json.loads(line)
        for line in (path / "openclaw_results_before_their_call.jsonl").read_text().splitlines()
    ]
    lines[4]["id"] = None
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    result = _check(data, "s.jsonl")
    assert [str(f.kind) for f in result.faults] == ["missing_result"] * 4
    repaired = [json.loads(line) for line in result.repaired.splitlines()]
    links = {line["id"]: line["parentId"] for line in repaired[1:]}
    assert "" not in links.values()
    assert links["b0000100"] == "b0000002" and links[None] == "b0000002"
    again = analyze(result.repaired, "s.jsonl", format=result.format)
    assert [str(f.kind) for f in again.faults] == ["existing_synthetic"] * 4


@given(st.text(st.sampled_from("aZ09_-|.:/\u00e9\U0001f600"), max_size=80))
@settings(max_examples=500, deadline=None)
def test_pi_sends_an_id_with_each_refused_character_as_an_underscore(call_id: str) -> None:
    assert pi_anthropic_id(call_id) == re.sub(r"[^a-zA-Z0-9_-]", "_", call_id)[:64]


def test_a_record_with_an_empty_id_stays_a_parent_when_a_pi_branch_is_relinked() -> None:
    """`"id": ""` is an id (the reader links `"parentId": ""` to it); only a missing id is none.

    The assistant message holding the call is written with the id `""`. Its
    result, moved after it, was linked past it to the record before (`""`
    taken for no id): the result was then an orphan, and a second reading
    dropped it.
    """
    path = Path(__file__).parents[1] / "formats" / "fixtures"
    lines = [
        json.loads(line)
        for line in (path / "openclaw_result_parented_on_call_id.jsonl").read_text().splitlines()
    ]
    lines[3]["id"] = ""
    result = _check(_jsonl(lines), "s.jsonl")
    assert [str(f.kind) for f in result.faults] == ["displaced_result"] * 2
    repaired = [json.loads(line) for line in result.repaired.splitlines()]
    assert (repaired[3]["id"], repaired[4]["parentId"]) == ("", "")


def test_a_link_written_twice_in_a_line_is_changed_where_readers_take_it() -> None:
    """Of `"parentId"` written twice, JSON.parse (pi) and orjson take the last: the repair too.

    The repair re-linked a result written before its call by rewriting the
    first `parentId`; the last one, which every reader takes, still named
    the old parent, so the result stayed off the branch and a second
    reading dropped it. Found by test_fuzz's broken-bytes run.
    """
    path = Path(__file__).parents[1] / "formats" / "fixtures"
    lines = (path / "openclaw_results_before_their_call.jsonl").read_text().splitlines()
    entry = json.loads(lines[4])
    assert (entry["id"], entry["parentId"]) == ("e6bf0b13", "b0000001")
    # The same line with a first, stale `parentId` before the id (as a bad merge writes it).
    lines[4] = '{"type": "message", "parentId": "gone", ' + lines[4].lstrip("{ ")
    data = ("\n".join(lines) + "\n").encode()
    result = _check(data, "s.jsonl", "discard")
    repaired = result.repaired.decode().splitlines()
    assert json.loads(repaired[4])["parentId"] == "b0000002"
    assert not analyze(result.repaired, "s.jsonl", "discard", format=result.format).plan
