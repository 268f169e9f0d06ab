"""OpenAI Responses input items (formats.md §3): an output anywhere after its call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from tests import sessions
from tests.formats.checks import faults, repaired
from transcripts.core.model import Role
from transcripts.engine import PRESETS, analyze
from transcripts.formats import load

SAMPLE = Path(__file__).resolve().parents[2] / "demo" / "samples" / "formats" / "responses.json"
ORPHAN = "call_RRRRRRRRRRRRRRRRRRRRRR03"
TEXT = PRESETS["synthesize"].synthetic_text


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call(call_id: str, name: str = "run") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def test_the_samples_orphaned_call_is_answered_right_after_it() -> None:
    data = SAMPLE.read_bytes()
    result = repaired(data, "responses.json")
    assert (result.format, result.provider) == ("responses", "openai_responses")
    assert faults(result) == [("missing_result", ORPHAN, 10)]
    assert result.faults[0].error == f"No tool output found for function call {ORPHAN}."
    original, items = json.loads(data), json.loads(result.repaired)
    assert items[11] == {"type": "function_call_output", "call_id": ORPHAN, "output": TEXT}
    assert items[:11] == original[:11]
    assert items[12:] == original[11:]
    assert b'\n  {\n    "type": "function_call_output",\n    "call_id": "' + ORPHAN.encode() in (
        result.repaired
    )


def test_native_policy_writes_codexs_aborted() -> None:
    result = repaired(SAMPLE.read_bytes(), "responses.json", "native")
    assert json.loads(result.repaired)[11]["output"] == "aborted"


def test_a_request_body_is_repaired_inside_its_input_member() -> None:
    head, tail = b'{"model": "gpt-5", "input": ', b', "tools": [], "store": false}\n'
    data = head + SAMPLE.read_bytes() + tail
    result = repaired(data, "request.json")
    assert result.format == "responses"
    assert faults(result) == [("missing_result", ORPHAN, 10)]
    assert result.repaired.startswith(head)
    assert result.repaired.endswith(tail)
    assert json.loads(result.repaired)["input"][11]["call_id"] == ORPHAN


def test_custom_and_local_shell_calls_get_the_output_codex_writes() -> None:
    items = [
        user("patch, then list"),
        {"type": "custom_tool_call", "call_id": "call_c1", "name": "apply_patch", "input": "*"},
        {
            "type": "local_shell_call",
            "call_id": "call_s1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"]},
        },
        user("stop"),
    ]
    data = json.dumps(items, indent=2).encode()
    result = repaired(data, "r.json", "native")
    assert faults(result) == [("missing_result", "call_c1", 1), ("missing_result", "call_s1", 2)]
    assert json.loads(result.repaired) == [
        items[0],
        items[1],
        {"type": "custom_tool_call_output", "call_id": "call_c1", "output": "aborted"},
        items[2],
        {"type": "function_call_output", "call_id": "call_s1", "output": "aborted"},
        items[3],
    ]


def test_early_duplicate_and_stray_outputs_are_moved_or_dropped() -> None:
    items = [
        user("go"),
        output("call_x1", "early"),
        call("call_x1"),
        call("call_x2"),
        output("call_x2", "ok"),
        output("call_x2", "twice"),
        output("call_zz", "stray"),
        user("thanks"),
    ]
    data = json.dumps(items, indent=1).encode()
    result = repaired(data, "r.json")
    assert faults(result) == [
        ("displaced_result", "call_x1", 1),
        ("duplicate_result", "call_x2", 5),
        ("orphaned_result", "call_zz", 6),
    ]
    assert "No tool call found for function call output with call_id call_zz." in [
        f.error for f in result.faults
    ]
    assert json.loads(result.repaired) == [items[i] for i in (0, 2, 1, 3, 4, 7)]


# Spacing, escapes and number forms a re-dump would change; an output after other
# items; an input message without `"type": "message"`.
HEALTHY = (
    b'[{"role": "user", "content": "caf\\u00e9 size?"},\n'
    b' {"type":"function_call","call_id":"call_h1","name":"size","arguments":"{\\"p\\": 1.0}"},\n'
    b' {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "b?"}]},\n'
    b' {"type":"function_call_output","call_id":"call_h1","output":"1e3"}  ,\n'
    b' {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"eA=="},\n'
    b' {"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}],'
    b'"n":1.0}]'
)


def test_a_healthy_file_round_trips_byte_for_byte() -> None:
    for policy in PRESETS:
        result = analyze(HEALTHY, "h.json", policy)
        assert result.format == "responses"
        assert result.faults == []
        assert result.repaired == HEALTHY
    assert load(HEALTHY, "h.json").records[0].role is Role.USER


@pytest.mark.parametrize(
    "document",
    [
        [{"type": ["function_call"], "call_id": "c1"}, output("c1", "x")],
        [{"type": {}, "content": [{"type": ["input_text"]}]}, call("c1")],
        [{"role": "user", "content": [{"type": ["text"], "text": "hi"}]}],
        {"input": [{"type": None}, {"type": 1.5}]},
    ],
)
def test_a_type_that_is_not_a_string_is_read_without_an_exception(document: Any) -> None:
    # The Responses sniff runs before the other documents' sniffs, on every upload.
    result = analyze(json.dumps(document).encode(), "odd.json")
    assert result.error is None or "unknown format" in result.error


def responses(script: sessions.Script) -> bytes:
    """Return the script's Chat Completions session as Responses input items."""
    items: list[dict[str, Any]] = []
    for message in json.loads(sessions.openai_chat(script)):
        role = message["role"]
        if role == "tool":
            items.append(output(message["tool_call_id"], message["content"]))
            continue
        part = "output_text" if role == "assistant" else "input_text"
        if message["content"]:
            text = [{"type": part, "text": message["content"]}]
            items.append({"type": "message", "role": role, "content": text})
        for tool_call in message.get("tool_calls", ()):
            items.append(call(tool_call["id"]))
    return json.dumps(items, ensure_ascii=False).encode()


@settings(max_examples=100, deadline=None)
@given(script=sessions.scripts())
def test_generated_sessions_are_found_as_injected_and_repaired(script: sessions.Script) -> None:
    data = responses(script)
    expected = script.expected("codex")  # outputs may come anywhere after their call
    for policy in ("synthesize", "discard", "openclaw"):
        result = repaired(data, "s.json", policy)
        assert sorted((str(f.kind), f.tool_call_id) for f in result.faults) == expected
        if not expected:
            assert result.repaired == data
