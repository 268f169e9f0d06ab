"""The pi and Gemini CLI resume models, on files whose real requests the agent tier captured.

Expected messages are what pi 0.73.1 and Gemini CLI 0.61.0 sent the mock
provider for these files (tests/agents/test_pi.py, test_gemini_cli.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transcripts import formats
from transcripts.replay import Message, preview
from transcripts.replay import gemini_cli as gemini_model
from transcripts.replay import openclaw as pi_model

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"


def _load(data: bytes, name: str = "s.jsonl") -> Any:
    return formats.load(data, name)


def _lines(*values: dict[str, Any]) -> bytes:
    return "".join(json.dumps(v) + "\n" for v in values).encode()


def test_pi_answers_an_unanswered_call_with_no_result_provided() -> None:
    got = preview(_load((SAMPLES / "formats" / "openclaw.jsonl").read_bytes()))
    assert got is not None
    p, q = "toolu_01PPPPPPPPPPPPPPPPPPPPPP", "toolu_01QQQQQQQQQQQQQQQQQQQQQQ"
    assert got.messages == [
        Message("user", ("What is in README.md?",)),
        Message("assistant", ("Read the file.",), (p,)),  # unsigned thinking goes as text
        Message("user", results=(p,)),
        Message("assistant", ("It describes a sample project.",)),
        Message("user", ("Run the deploy script.",)),
        Message("assistant", calls=(q,)),
        Message("user", results=(q,)),
        Message("user", ("Why did it stop?",)),
    ]
    assert got.added == [Message("tool", (pi_model.NO_RESULT,), results=(q,))]
    assert got.valid


def test_pi_drops_an_aborted_turn_and_its_calls() -> None:
    data = (SAMPLES / "cases" / "08_pi-aborted-toolcall-then-user.jsonl").read_bytes()
    got = preview(_load(data))
    assert got is not None
    assert ("call", "toolu_syn_mig_01") in {(d.what, d.tool_call_id) for d in got.dropped}
    assert all("toolu_syn_mig_01" not in m.calls for m in got.messages)
    assert "Running the migration now." not in {t for m in got.messages for t in m.texts}
    assert got.valid


def test_pi_rewrites_another_providers_call_ids_for_anthropic() -> None:
    call_id = "call_abc|fc_def"
    data = _lines(
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "message": {"role": "user", "content": "go"},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "thinkingSignature": "{}"},
                    {"type": "toolCall", "id": call_id, "name": "exec", "arguments": {}},
                ],
                "api": "openai-responses",
                "provider": "openai",
                "model": "gpt-5",
                "stopReason": "toolUse",
            },
        },
        {
            "type": "message",
            "id": "c",
            "parentId": "b",
            "message": {
                "role": "toolResult",
                "toolCallId": call_id,
                "content": [],
                "isError": False,
            },
        },
    )
    anthropic = pi_model.Target("anthropic", "anthropic-messages", "claude-sonnet-4-5")
    got = pi_model.preview_for(_load(data), anthropic)
    assert got.provider == "anthropic"
    assert got.messages[1:] == [
        Message("assistant", ("plan",), ("call_abc_fc_def",)),
        Message("user", results=("call_abc_fc_def",)),
    ]


def test_pi_sends_a_compaction_summary_then_what_it_kept() -> None:
    data = _lines(
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "message": {"role": "user", "content": "old"},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "message": {"role": "user", "content": "kept"},
        },
        {"type": "compaction", "id": "c", "parentId": "b", "summary": "S", "firstKeptEntryId": "b"},
        {
            "type": "message",
            "id": "d",
            "parentId": "c",
            "message": {"role": "user", "content": "new"},
        },
    )
    got = preview(_load(data))
    assert got is not None
    texts = [m.texts[0] for m in got.messages]
    assert texts[0].startswith("The conversation history before this point was compacted")
    assert texts[0].endswith("<summary>\nS\n</summary>")
    assert texts[1:] == ["kept", "new"]


def _gemini(*messages: dict[str, Any]) -> bytes:
    header = {"sessionId": "s", "projectHash": "h", "startTime": "t", "lastUpdated": "t"}
    return _lines(header, *messages)


def _call(cid: str, result: str | None = None, status: str = "success") -> dict[str, Any]:
    call: dict[str, Any] = {"id": cid, "name": "ls", "args": {}, "status": status}
    if result is not None:
        call["result"] = [
            {"functionResponse": {"id": cid, "name": "ls", "response": {"output": result}}}
        ]
    return call


def test_gemini_cli_sends_an_unanswered_call_as_is_and_gemini_refuses_it() -> None:
    got = preview(_load((SAMPLES / "formats" / "gemini_cli_session.jsonl").read_bytes()))
    assert got is not None
    a, b = "list_directory-1764662402000-aaaa", "run_shell_command-1764662461000-bbbb"
    assert got.messages == [
        Message("user", ("List the src folder.",)),
        Message("assistant", calls=(a,)),
        Message("user", results=(a,)),
        Message("assistant", ("src has main.py and util.py.",)),
        Message("user", ("Run the linter.",)),
        Message("assistant", calls=(b,)),
        Message("user", ("Are you still there?",)),
    ]
    assert [v.tool_call_id for v in got.violations] == [b]
    assert "number of function response parts" in got.violations[0].error


def test_gemini_cli_keeps_a_rewritten_message_in_its_first_place() -> None:
    data = _gemini(
        {"id": "u1", "type": "user", "content": [{"text": "go"}]},
        {
            "id": "g1",
            "type": "gemini",
            "content": "",
            "toolCalls": [_call("c1", status="executing")],
        },
        {"id": "u2", "type": "user", "content": [{"text": "later"}]},
        {"id": "g1", "type": "gemini", "content": "", "toolCalls": [_call("c1", "x")]},
    )
    got = preview(_load(data))
    assert got is not None
    # The response follows its call; the later user turn merges into it.
    assert got.messages == [
        Message("user", ("go",)),
        Message("assistant", calls=("c1",)),
        Message("user", ("later",), results=("c1",)),
    ]
    assert got.valid


def test_gemini_cli_forgets_what_a_rewind_removes() -> None:
    data = _gemini(
        {"id": "u1", "type": "user", "content": [{"text": "one"}]},
        {
            "id": "g1",
            "type": "gemini",
            "content": "",
            "toolCalls": [_call("c1", status="executing")],
        },
        {"$rewindTo": "g1"},
        {"id": "u2", "type": "user", "content": [{"text": "two"}]},
    )
    got = preview(_load(data))
    assert got is not None
    assert got.messages == [Message("user", ("one", "two"))]
    assert got.valid


def test_gemini_cli_closes_a_history_that_ends_with_tool_responses() -> None:
    data = _gemini(
        {"id": "u1", "type": "user", "content": [{"text": "go"}]},
        {"id": "g1", "type": "gemini", "content": "", "toolCalls": [_call("c1", "x")]},
    )
    got = preview(_load(data))
    assert got is not None
    assert got.messages[-1] == Message("assistant", (gemini_model.INTERRUPTED,))
    assert got.added == [Message("assistant", (gemini_model.INTERRUPTED,))]


def test_gemini_cli_sends_no_response_for_a_cancelled_call_without_a_result() -> None:
    data = _gemini(
        {"id": "u1", "type": "user", "content": [{"text": "go"}]},
        {
            "id": "g1",
            "type": "gemini",
            "content": "",
            "toolCalls": [_call("c1", status="cancelled")],
        },
        {"id": "u2", "type": "user", "content": [{"text": "why?"}]},
    )
    got = preview(_load(data))
    assert got is not None
    assert [v.tool_call_id for v in got.violations] == ["c1"]
