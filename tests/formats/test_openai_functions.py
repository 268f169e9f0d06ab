"""Legacy OpenAI `function_call` / `role: "function"` messages (formats.md §2.4): no ids."""

from __future__ import annotations

import json
from typing import Any

from tests.formats.checks import faults, repaired
from transcripts.engine import PRESETS, analyze

TEXT = PRESETS["synthesize"].synthetic_text


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calls(name: str, arguments: str = "{}", content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "function_call": {"name": name, "arguments": arguments},
    }


def answer(name: str, content: str) -> dict[str, Any]:
    return {"role": "function", "name": name, "content": content}


MESSAGES = [
    {"role": "system", "content": "You report the weather."},
    user("Weather in Paris?"),
    calls("get_weather", '{"city": "Paris"}'),
    answer("get_weather", "sunny"),
    {"role": "assistant", "content": "It is sunny in Paris."},
    user("And in Lyon?"),
    calls("get_weather", '{"city": "Lyon"}'),
    user("Never mind."),
]


def test_an_unanswered_function_call_gets_a_function_message_after_it() -> None:
    data = json.dumps(MESSAGES, indent=2).encode()
    result = repaired(data, "functions.json")
    assert (result.format, result.provider) == ("openai_functions", "openai_chat")
    assert faults(result) == [("missing_result", "@get_weather", 6)]
    out = json.loads(result.repaired)
    assert out == [
        *MESSAGES[:7],
        {"role": "function", "name": "get_weather", "content": TEXT},
        MESSAGES[7],
    ]


def test_a_function_message_answers_the_open_call_of_its_name_only() -> None:
    messages = [
        user("list it"),
        calls("ls"),
        user("stop"),
        calls("ls"),
        answer("ls", "a b"),
        {"role": "assistant", "content": "a and b"},
    ]
    result = repaired(json.dumps(messages).encode(), "f.json")
    assert faults(result) == [("missing_result", "@ls", 1)]
    assert json.loads(result.repaired)[2] == answer("ls", TEXT)


def test_late_repeated_and_unknown_function_messages_are_moved_or_dropped() -> None:
    messages = [
        user("look it up"),
        calls("search", '{"q": "a"}'),
        user("hurry"),
        answer("search", "A"),
        calls("lookup", '{"id": 1}'),
        answer("lookup", "one"),
        answer("lookup", "one again"),
        answer("translate", "hola"),
        user("done"),
    ]
    data = json.dumps(messages, indent=4).encode()
    result = repaired(data, "f.json")
    assert faults(result) == [
        ("displaced_result", "@search", 3),
        ("duplicate_result", "@lookup", 6),
        ("orphaned_result", "@translate", 7),
    ]
    assert json.loads(result.repaired) == [messages[i] for i in (0, 1, 3, 2, 4, 5, 8)]


def test_discard_takes_the_call_out_of_the_message_and_keeps_its_text() -> None:
    messages = [user("weather?"), calls("get_weather", "{}", "Checking."), user("stop")]
    result = analyze(json.dumps(messages).encode(), "f.json", "discard")
    assert [op.kind.value for op in result.plan.ops] == ["drop_call"]
    assert json.loads(result.repaired) == [
        messages[0],
        {"role": "assistant", "content": "Checking."},
        messages[2],
    ]
    # Without a legacy message left, the file is plain Chat Completions.
    again = analyze(result.repaired, "f.json", "discard")
    assert (again.format, again.faults) == ("openai_chat", [])


def test_tool_calls_and_legacy_calls_in_one_file_are_both_paired() -> None:
    tool_call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        user("go"),
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        user("stop"),
        calls("pwd"),
        user("stop again"),
    ]
    result = repaired(json.dumps(messages).encode(), "f.json", "native")
    assert result.format == "openai_functions"
    assert faults(result) == [("missing_result", "call_1", 1), ("missing_result", "@pwd", 3)]
    out = json.loads(result.repaired)
    assert out[2] == {"role": "tool", "tool_call_id": "call_1", "content": "aborted"}
    assert out[5] == answer("pwd", "aborted")


def test_a_null_function_call_of_a_current_sdk_dump_is_not_the_legacy_form() -> None:
    tool_call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        user("go"),
        {"role": "assistant", "content": None, "function_call": None, "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a"},
    ]
    assert analyze(json.dumps(messages).encode(), "f.json").format == "openai_chat"


# Spacing, escapes and number forms a re-dump would change.
HEALTHY = (
    b'[ {"role":"user","content":"caf\\u00e9?"},\n'
    b'  {"role": "assistant", "content": null, "function_call": {"name": "price", '
    b'"arguments": "{\\"item\\": 1.0}"}} ,\n'
    b'  {"role":"function","name":"price","content":"2.50\\/cup"},\n'
    b'  {"role":"assistant","content":"2.50 a cup.","n":1E2} ]\n'
)


def test_a_healthy_file_round_trips_byte_for_byte() -> None:
    for policy in PRESETS:
        result = analyze(HEALTHY, "h.json", policy)
        assert result.format == "openai_functions"
        assert result.faults == []
        assert result.repaired == HEALTHY
