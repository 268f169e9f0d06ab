"""Amazon Bedrock Converse messages, under Anthropic's rules: results open the next user message."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings

from tests import sessions
from tests.formats.checks import faults, repaired
from transcripts.engine import PRESETS, analyze

TEXT = PRESETS["synthesize"].synthetic_text


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def use(call_id: str, name: str = "read_file", arguments: Any = None) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments or {}}}


def result(call_id: str, value: str = "ok", status: str = "success") -> dict[str, Any]:
    body = {"toolUseId": call_id, "content": [{"text": value}], "status": status}
    return {"toolResult": body}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


MESSAGES = [
    user(text("List the bucket, then read a.txt.")),
    assistant(text("Listing."), use("tooluse_A", "list_bucket", {"bucket": "b"})),
    user(result("tooluse_A", "a.txt b.txt")),
    assistant(use("tooluse_B", "read_file", {"key": "a.txt"})),
    user(text("Stop, I changed my mind.")),
]


def test_an_orphaned_tool_use_is_answered_at_the_start_of_the_next_user_message() -> None:
    data = json.dumps(MESSAGES, indent=2).encode()
    out = repaired(data, "converse.json")
    assert (out.format, out.provider) == ("bedrock", "bedrock")
    assert faults(out) == [("missing_result", "tooluse_B", 3)]
    assert out.faults[0].error.startswith(
        "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "tooluse_B."
    )
    messages = json.loads(out.repaired)
    assert len(messages) == len(MESSAGES)
    assert messages[4] == user(result("tooluse_B", TEXT, "error"), text("Stop, I changed my mind."))
    assert messages[:4] == MESSAGES[:4]


def test_a_converse_request_body_keeps_its_other_members() -> None:
    head = b'{"modelId":"anthropic.claude-sonnet-4","system":[{"text":"Be brief."}],"messages":'
    tail = b',"inferenceConfig":{"maxTokens":512,"temperature":0.0}}'
    data = head + json.dumps(MESSAGES).encode() + tail
    out = repaired(data, "request.json", "native")
    assert out.format == "bedrock"
    assert out.repaired.startswith(head)
    assert out.repaired.endswith(tail)
    block = json.loads(out.repaired)["messages"][4]["content"][0]["toolResult"]
    assert block["content"] == [{"text": "[Request interrupted by user for tool use]"}]


def test_a_tool_use_followed_by_an_assistant_message_gets_a_user_message() -> None:
    messages = [user(text("read it")), assistant(use("tu_1")), assistant(text("Sorry."))]
    out = repaired(json.dumps(messages).encode(), "c.json")
    assert json.loads(out.repaired) == [
        messages[0],
        messages[1],
        user(result("tu_1", TEXT, "error")),
        messages[2],
    ]


def test_repeated_stray_and_trailing_results_are_mended_inside_their_message() -> None:
    messages = [
        user(text("go")),
        assistant(use("tu_A"), use("tu_B")),
        user(text("here you are"), result("tu_A"), result("tu_A", "again"), result("tu_Z")),
        user(result("tu_B")),
        assistant(text("ok")),
    ]
    out = repaired(json.dumps(messages, indent=1).encode(), "c.json")
    assert faults(out) == [
        ("result_not_first", "tu_A", 2),
        ("duplicate_result", "tu_A", 2),
        ("orphaned_result", "tu_Z", 2),
        ("displaced_result", "tu_B", 3),
    ]
    assert json.loads(out.repaired) == [
        messages[0],
        messages[1],
        user(result("tu_A"), result("tu_B"), text("here you are")),
        messages[4],
    ]


# Spacing, escapes and number forms a re-dump would change; reasoning and a cache point.
HEALTHY = (
    b'[{"role":"user","content":[{"text":"caf\\u00e9?"},{"cachePoint":{"type":"default"}}]},\n'
    b' {"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t"}}},'
    b'{"toolUse":{"toolUseId":"tu_1","name":"price","input":{"n":1.0}}}]},\n'
    b' {"role":"user","content":[{"toolResult":{"toolUseId":"tu_1","content":[{"json":'
    b'{"usd":2.50}}]}}, {"text":"thanks\\/bye"}]}]'
)


def test_a_healthy_file_round_trips_byte_for_byte() -> None:
    for policy in PRESETS:
        out = analyze(HEALTHY, "h.json", policy)
        assert out.format == "bedrock"
        assert out.faults == []
        assert out.repaired == HEALTHY


def test_messages_without_tool_blocks_are_still_read_as_converse() -> None:
    data = b'[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[]}]'
    out = analyze(data, "c.json")
    assert (out.format, out.faults, out.repaired) == ("bedrock", [], data)


def bedrock(script: sessions.Script) -> bytes:
    """Return the script's Anthropic Messages session as Converse messages."""
    messages = []
    for message in json.loads(sessions.anthropic(script)):
        blocks = []
        for block in message["content"]:
            if block["type"] == "text":
                blocks.append(text(block["text"]))
            elif block["type"] == "tool_use":
                blocks.append(use(block["id"], block["name"], block["input"]))
            else:
                blocks.append(result(block["tool_use_id"], block["content"]))
        messages.append({"role": message["role"], "content": blocks})
    return json.dumps(messages, indent=2, ensure_ascii=False).encode()


@settings(max_examples=100, deadline=None)
@given(script=sessions.scripts())
def test_generated_sessions_are_found_as_injected_and_repaired(script: sessions.Script) -> None:
    data = bedrock(script)
    expected = script.expected("anthropic")
    for policy in ("synthesize", "discard", "openclaw"):
        out = repaired(data, "s.json", policy)
        assert sorted((str(f.kind), f.tool_call_id) for f in out.faults) == expected
        if not expected:
            assert out.repaired == data
