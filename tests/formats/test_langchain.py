"""LangChain `messages_to_dict` elements (formats.md §8.1), under Chat Completions rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings

from tests import sessions
from tests.formats.checks import faults, repaired
from transcripts.engine import PRESETS, analyze

SAMPLE = (
    Path(__file__).resolve().parents[2] / "demo" / "samples" / "formats" / "langchain_messages.json"
)
ORPHAN = "call_LLLLLLLLLLLLLLLLLLLLLL02"
TEXT = PRESETS["synthesize"].synthetic_text


def human(text: str) -> dict[str, Any]:
    return {"type": "human", "data": {"content": text, "type": "human"}}


def ai(*tool_calls: dict[str, Any], content: Any = "", **extra: Any) -> dict[str, Any]:
    data = {"content": content, "type": "ai", "tool_calls": list(tool_calls), **extra}
    return {"type": "ai", "data": data}


def tool_call(call_id: str, name: str = "run") -> dict[str, Any]:
    return {"name": name, "args": {}, "id": call_id, "type": "tool_call"}


def tool(call_id: str, content: str) -> dict[str, Any]:
    data = {"content": content, "type": "tool", "tool_call_id": call_id, "status": "success"}
    return {"type": "tool", "data": data}


def test_the_samples_orphaned_call_gets_an_error_tool_message_after_it() -> None:
    data = SAMPLE.read_bytes()
    result = repaired(data, "langchain_messages.json")
    assert (result.format, result.provider) == ("langchain", "openai_chat")
    assert faults(result) == [("missing_result", ORPHAN, 3)]
    assert ORPHAN in result.faults[0].error
    original, out = json.loads(data), json.loads(result.repaired)
    # A ToolMessage shaped like the file's own: its fields, in its order.
    assert out[4] == {
        "type": "tool",
        "data": {
            "content": TEXT,
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "tool",
            "name": "multiply",
            "id": None,
            "tool_call_id": ORPHAN,
            "artifact": None,
            "status": "error",
        },
    }
    assert list(out[4]["data"]) == list(original[2]["data"])
    assert out[:4] == original[:4]
    assert out[5:] == original[4:]


def test_a_langgraph_state_with_messages_is_read_too() -> None:
    data = b'{"messages": ' + SAMPLE.read_bytes() + b', "remaining_steps": 24}'
    result = repaired(data, "state.json", "native")
    assert result.format == "langchain"
    assert json.loads(result.repaired)["messages"][4]["data"]["content"] == "aborted"
    assert result.repaired.endswith(b', "remaining_steps": 24}')


def test_late_repeated_and_stray_tool_messages_are_moved_or_dropped() -> None:
    elements = [
        human("go"),
        ai(tool_call("call_a", "add")),
        human("hurry"),
        tool("call_a", "5"),
        ai(tool_call("call_b", "mul")),
        tool("call_b", "20"),
        tool("call_b", "20"),
        tool("call_x", "?"),
        human("thanks"),
    ]
    result = repaired(json.dumps(elements, indent=2).encode(), "lc.json")
    assert faults(result) == [
        ("displaced_result", "call_a", 3),
        ("duplicate_result", "call_b", 6),
        ("orphaned_result", "call_x", 7),
    ]
    assert json.loads(result.repaired) == [elements[i] for i in (0, 1, 3, 2, 4, 5, 8)]


def _anthropic_ai() -> dict[str, Any]:
    """Return a ChatAnthropic-style `ai` element: its call also a `tool_use` content block."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
    raw = {"id": "toolu_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    bad = {"name": "calc", "args": '{"a": ', "id": "call_bad", "error": "bad JSON"}
    return ai(
        tool_call("toolu_1", "ls"),
        content=[{"type": "text", "text": "Listing."}, use],
        additional_kwargs={"tool_calls": [raw]},
        invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}],
    )


def test_discard_removes_a_call_everywhere_langchain_keeps_it() -> None:
    elements = [human("list"), _anthropic_ai(), human("stop")]
    result = repaired(json.dumps(elements).encode(), "lc.json", "discard")
    assert faults(result) == [
        ("missing_result", "toolu_1", 1),
        ("malformed_call", "call_bad", 1),
        ("missing_result", "call_bad", 1),
    ]
    assert "not valid JSON" in result.faults[1].detail
    data = json.loads(result.repaired)[1]["data"]
    assert data["content"] == [{"type": "text", "text": "Listing."}]
    assert data["tool_calls"] == []
    assert data["invalid_tool_calls"] == []
    assert data["additional_kwargs"] == {"tool_calls": []}


def test_an_invalid_tool_call_is_dropped_and_a_valid_one_answered() -> None:
    elements = [human("list"), _anthropic_ai(), human("stop")]
    result = repaired(json.dumps(elements).encode(), "lc.json")
    out = json.loads(result.repaired)
    assert out[1]["data"]["invalid_tool_calls"] == []
    assert out[1]["data"]["tool_calls"] == elements[1]["data"]["tool_calls"]
    assert out[1]["data"]["content"] == elements[1]["data"]["content"]
    assert out[2]["data"]["tool_call_id"] == "toolu_1"
    assert out[3] == elements[2]


def test_an_invalid_tool_call_with_whole_arguments_says_why_langchain_refused_it() -> None:
    bad = {"name": "calc", "args": "[1]", "id": "c9", "error": "args must be an object"}
    elements = [human("go"), ai(invalid_tool_calls=[bad]), tool("c9", "?")]
    result = analyze(json.dumps(elements).encode(), "lc.json")
    malformed = [f for f in result.faults if str(f.kind) == "malformed_call"]
    assert [f.detail for f in malformed] == [
        "LangChain could not parse the call (args must be an object)"
    ]
    # The call goes, and its answer with it; the `ai` message held nothing else.
    assert json.loads(result.repaired) == [elements[0]]


def test_an_element_whose_type_is_not_a_string_is_left_out_of_pairing() -> None:
    elements = [human("go"), {"type": ["ai"], "data": {"tool_calls": [tool_call("c1")]}}]
    result = analyze(json.dumps(elements).encode(), "lc.json")
    assert (result.format, result.faults) == ("langchain", [])
    assert result.transcript is not None
    assert result.transcript.records[1].kind == ""


# Spacing, escapes and number forms a re-dump would change.
HEALTHY = (
    b'[{"type":"system","data":{"content":"You add.","type":"system"}},\n'
    b' {"type": "human", "data": {"content": "caf\\u00e9: 2+3?", "type": "human"}},\n'
    b' {"type":"AIMessageChunk","data":{"content":"","type":"AIMessageChunk","tool_calls":'
    b'[{"name":"add","args":{"a":2.0,"b":3},"id":"c1","type":"tool_call"}]}},\n'
    b' {"type":"tool","data":{"content":"5","type":"tool","tool_call_id":"c1","status":"success"}}'
    b"\n]"
)


def test_a_healthy_file_round_trips_byte_for_byte() -> None:
    for policy in PRESETS:
        result = analyze(HEALTHY, "h.json", policy)
        assert result.format == "langchain"
        assert result.faults == []
        assert result.repaired == HEALTHY


def langchain(script: sessions.Script) -> bytes:
    """Return the script's Chat Completions session as `messages_to_dict` elements."""
    kinds = {"system": "system", "user": "human", "assistant": "ai", "tool": "tool"}
    elements = []
    for message in json.loads(sessions.openai_chat(script)):
        kind = kinds[message["role"]]
        data: dict[str, Any] = {"content": message["content"] or "", "type": kind}
        if kind == "tool":
            data.update(tool_call_id=message["tool_call_id"], status="success")
        if kind == "ai":
            data["tool_calls"] = [
                tool_call(c["id"], c["function"]["name"]) for c in message.get("tool_calls", ())
            ]
        elements.append({"type": kind, "data": data})
    return json.dumps(elements, indent=2, ensure_ascii=False).encode()


@settings(max_examples=100, deadline=None)
@given(script=sessions.scripts())
def test_generated_sessions_are_found_as_injected_and_repaired(script: sessions.Script) -> None:
    data = langchain(script)
    expected = script.expected()
    for policy in ("synthesize", "discard", "openclaw"):
        result = repaired(data, "s.json", policy)
        assert sorted((str(f.kind), f.tool_call_id) for f in result.faults) == expected
        if not expected:
            assert result.repaired == data
