"""Vercel AI SDK model messages (formats.md §8.2): v5+ `input`/`output`, v4 `args`/`result`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings

from tests import sessions
from tests.formats.checks import faults, repaired
from transcripts.engine import PRESETS, analyze

SAMPLE = (
    Path(__file__).resolve().parents[2] / "demo" / "samples" / "formats" / "vercel_ai_messages.json"
)
ORPHAN = "call_VVVVVVVVVVVVVVVVVVVVVV02"
TEXT = PRESETS["synthesize"].synthetic_text


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"type": "tool-call", "toolCallId": call_id, "toolName": name, "input": {}}


def result(call_id: str, value: str = "ok", name: str = "search") -> dict[str, Any]:
    output = {"type": "text", "value": value}
    return {"type": "tool-result", "toolCallId": call_id, "toolName": name, "output": output}


def test_the_samples_orphaned_call_gets_an_error_tool_message_after_it() -> None:
    data = SAMPLE.read_bytes()
    out = repaired(data, "vercel_ai_messages.json")
    assert (out.format, out.provider) == ("vercel_ai", "openai_chat")
    assert faults(out) == [("missing_result", ORPHAN, 3)]
    original, messages = json.loads(data), json.loads(out.repaired)
    error = {"type": "error-text", "value": TEXT}
    part = {"type": "tool-result", "toolCallId": ORPHAN, "toolName": "closeIssue", "output": error}
    assert messages[4] == {"role": "tool", "content": [part]}
    assert messages[:4] == original[:4]
    assert messages[5:] == original[4:]


def test_a_v4_history_gets_a_v4_result() -> None:
    messages = [
        user("Weather in Oslo?"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "c1", "toolName": "weather", "args": {}},
            ],
        },
        user("stop"),
    ]
    out = repaired(json.dumps(messages).encode(), "v4.json", "native")
    part = {
        "type": "tool-result",
        "toolCallId": "c1",
        "toolName": "weather",
        "result": "aborted",
        "isError": True,
    }
    assert json.loads(out.repaired)[2] == {"role": "tool", "content": [part]}


def test_one_tool_message_answers_several_calls_and_loses_only_its_stray_part() -> None:
    messages = [
        user("three searches"),
        {"role": "assistant", "content": [call("c1"), call("c2"), call("c3")]},
        {"role": "tool", "content": [result("c1"), result("zz"), result("c3")]},
        user("and?"),
        {"role": "tool", "content": [result("c1", "again")]},
    ]
    out = repaired(json.dumps(messages, indent=2).encode(), "v.json", "native")
    assert faults(out) == [
        ("missing_result", "c2", 1),
        ("orphaned_result", "zz", 2),
        ("duplicate_result", "c1", 4),
    ]
    error = {"type": "error-text", "value": "aborted"}
    added = {"type": "tool-result", "toolCallId": "c2", "toolName": "search", "output": error}
    assert json.loads(out.repaired) == [
        messages[0],
        messages[1],
        {"role": "tool", "content": [result("c1"), result("c3")]},
        {"role": "tool", "content": [added]},
        messages[3],
    ]


def test_a_late_result_leaves_its_tool_message_for_a_message_after_the_call() -> None:
    messages = [
        user("go"),
        {"role": "assistant", "content": [call("c1"), call("c2")]},
        {"role": "tool", "content": [result("c1")]},
        user("hurry"),
        {"role": "tool", "content": [result("c2"), result("c9")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    out = repaired(json.dumps(messages).encode(), "v.json")
    assert faults(out) == [("displaced_result", "c2", 4), ("orphaned_result", "c9", 4)]
    assert json.loads(out.repaired) == [
        messages[0],
        messages[1],
        messages[2],
        {"role": "tool", "content": [result("c2")]},
        messages[3],
        messages[5],
    ]


# Spacing, escapes and number forms a re-dump would change; a provider-executed
# call answered inside the assistant message; a tool message with two results.
HEALTHY = (
    b'[\n\t{"role":"user","content":[{"type":"text","text":"caf\\u00e9 news?"}]},\n'
    b'\t{"role":"assistant","content":[{"type":"tool-call","toolCallId":"ws1",'
    b'"toolName":"web_search","input":{},"providerExecuted":true},{"type":"tool-result",'
    b'"toolCallId":"ws1","toolName":"web_search","output":{"type":"json","value":[1.0]}},'
    b'{"type":"tool-call","toolCallId":"a","toolName":"f","input":{"n":1E2}},'
    b'{"type":"tool-call","toolCallId":"b","toolName":"f","input":{}}]},\n'
    b'\t{"role":"tool","content":[{"type":"tool-result","toolCallId":"b","toolName":"f",'
    b'"output":{"type":"text","value":"B"}},{"type":"tool-result","toolCallId":"a",'
    b'"toolName":"f","output":{"type":"text","value":"A\\/a"}}]}\n]'
)


def test_a_healthy_file_round_trips_byte_for_byte() -> None:
    for policy in PRESETS:
        out = analyze(HEALTHY, "h.json", policy)
        assert out.format == "vercel_ai"
        assert out.faults == []
        assert out.repaired == HEALTHY


def test_messages_a_repair_left_without_tool_parts_are_still_the_sdks() -> None:
    messages = [
        {"role": "system", "content": "You help."},
        user("close issue 7"),
        {"role": "assistant", "content": [{"type": "text", "text": "Closing."}, call("c1")]},
        user("no, stop"),
    ]
    out = repaired(json.dumps(messages).encode(), "v.json", "discard")
    assert json.loads(out.repaired)[2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Closing."}],
    }
    # User and assistant text parts alone are Anthropic's shape as much as the SDK's.
    text_only = json.dumps(json.loads(out.repaired)[1:]).encode()
    assert analyze(text_only, "v.json").format == "anthropic"


def vercel(script: sessions.Script) -> bytes:
    """Return the script's Chat Completions session as model messages.

    Consecutive tool messages become one, so one message answers several calls.
    """
    messages: list[dict[str, Any]] = []
    for message in json.loads(sessions.openai_chat(script)):
        role = message["role"]
        if role == "tool":
            part = result(message["tool_call_id"], message["content"])
            if messages[-1]["role"] == "tool":
                messages[-1]["content"].append(part)
            else:
                messages.append({"role": "tool", "content": [part]})
        elif role == "assistant" and "tool_calls" in message:
            text = [{"type": "text", "text": message["content"]}] if message["content"] else []
            tool_calls = [call(c["id"]) for c in message["tool_calls"]]
            messages.append({"role": "assistant", "content": text + tool_calls})
        else:
            messages.append({"role": role, "content": message["content"]})
    return json.dumps(messages, indent=2, ensure_ascii=False).encode()


@settings(max_examples=100, deadline=None)
@given(script=sessions.scripts())
def test_generated_sessions_are_found_as_injected_and_repaired(script: sessions.Script) -> None:
    # Without a tool part nothing marks the messages as the SDK's (they read as plain chat).
    assume(any(turn.calls for turn in script.turns))
    data = vercel(script)
    expected = script.expected()
    for policy in ("synthesize", "discard", "openclaw"):
        # Dropping every call may leave only string contents: plain chat messages.
        out = repaired(data, "s.json", policy, same_format=policy != "discard")
        assert sorted((str(f.kind), f.tool_call_id) for f in out.faults) == expected
        if not expected:
            assert out.repaired == data
