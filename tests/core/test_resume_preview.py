"""The resume models of Claude Code and Codex, on files in each agent's own layout.

The agent tier (tests/agents) checks the same models against the real CLIs;
these run without them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcripts import formats
from transcripts.replay import Message, Preview, check_request, preview, request_messages
from transcripts.replay.claude_code import ENDED, MISSING, NO_CONTENT, NO_RESPONSE, ORPHANED

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "tests" / "agents" / "sessions"
SAMPLES = ROOT / "demo" / "samples" / "formats"


def _preview(path: Path, format: str | None = None) -> Preview:
    shown = preview(formats.load(path.read_bytes(), path.name, format))
    assert shown is not None
    return shown


def _drops(shown: Preview) -> list[tuple[str, str | None]]:
    return [(d.what, d.tool_call_id) for d in shown.dropped]


def test_claude_code_drops_an_unanswered_call_and_joins_the_prompts_around_it() -> None:
    shown = _preview(SAMPLES / "claude_code.jsonl")
    call = "toolu_01CCCCCCCCCCCCCCCCCCCCCC"
    assert shown.valid
    assert _drops(shown) == [("call", call)]
    assert shown.messages[-2:] == [
        Message(
            "user",
            (
                "Run the full integration suite too.",
                "[Request interrupted by user]",
                "Only run the smoke tests.",
            ),
        ),
        Message("assistant", (NO_RESPONSE,)),
    ]
    assert shown.added == [Message("assistant", (NO_RESPONSE,))]


def test_claude_code_answers_a_call_at_the_end_of_the_file_itself() -> None:
    shown = _preview(SESSIONS / "claude_code_tail_call.jsonl")
    assert shown.messages[-2:] == [
        Message("user", results=("toolu_S1",)),
        Message("assistant", (NO_RESPONSE,)),
    ]
    assert shown.added == [
        Message("user", (ENDED,), results=("toolu_S1",)),
        Message("assistant", (NO_RESPONSE,)),
    ]
    assert shown.dropped == []


def test_claude_code_drops_only_the_call_of_a_message_with_text() -> None:
    shown = _preview(SESSIONS / "claude_code_mid_call_then_text.jsonl")
    assert _drops(shown) == [("call", "toolu_S2")]
    assert shown.messages[1:3] == [
        Message("assistant", ("Running.",)),
        Message("assistant", ("Something else.",)),
    ]


def test_claude_code_replaces_a_late_result_and_empties_its_message() -> None:
    shown = _preview(SESSIONS / "claude_code_result_after_assistant.jsonl")
    assert [m.texts or m.results for m in shown.messages] == [
        ("go",),
        (),
        ("toolu_S4",),
        ("Waiting.",),
        (NO_CONTENT,),
        ("Got it.",),
    ]
    assert shown.added == [Message("user", (MISSING,), results=("toolu_S4",))]
    assert _drops(shown) == [("result", "toolu_S4")]


def test_claude_code_reattaches_results_parented_on_their_own_call_lines() -> None:
    shown = _preview(SESSIONS / "claude_code_parallel_branch_results.jsonl")
    assert shown.messages[1:3] == [
        Message("assistant", calls=("toolu_S7a", "toolu_S7b")),
        Message("user", results=("toolu_S7a", "toolu_S7b")),
    ]
    assert shown.dropped == [] and shown.valid


def test_claude_code_without_uuids_sends_only_the_last_entry(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in (SAMPLES / "claude_code.jsonl").read_text().splitlines()]
    for line in lines:
        line.pop("uuid", None)
        line.pop("parentUuid", None)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    shown = _preview(path, "claude_code")
    assert shown.messages == [
        Message("user", ("Only run the smoke tests.",)),
        Message("assistant", (NO_RESPONSE,)),
    ]
    assert len(shown.dropped) == 9


@pytest.mark.parametrize("after_text", [False, True])
def test_claude_code_sends_nothing_for_an_empty_user_entry_but_answers_it(
    after_text: bool, tmp_path: Path
) -> None:
    # As Claude Code 2.1.328 sends it (observed): the empty entry is left out, and the
    # "No response requested." it adds after a last user entry follows what came before.
    fixture = ROOT / "tests" / "formats" / "fixtures" / "claude_code_result_sibling_of_call.jsonl"
    prompt, text, _, result = (json.loads(line) for line in fixture.read_text().splitlines())
    result["parentUuid"] = text["uuid"] if after_text else None
    result["message"]["content"] = []
    del result["toolUseResult"]
    lines = [prompt, text, result] if after_text else [result]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    shown = _preview(path)
    before = [Message("user", ("Run the tests.",)), Message("assistant", ("Running the suite.",))]
    assert shown.messages == [*(before if after_text else []), Message("assistant", (NO_RESPONSE,))]
    assert shown.added == [Message("assistant", (NO_RESPONSE,))]
    assert shown.valid


def test_claude_code_opens_a_trimmed_file_on_its_orphaned_result() -> None:
    shown = _preview(SESSIONS / "claude_code_trimmed_head.jsonl")
    assert shown.messages[0] == Message("user", (ORPHANED,))
    assert _drops(shown) == [
        ("call", "toolu_01CCCCCCCCCCCCCCCCCCCCCC"),
        ("result", "toolu_01AAAAAAAAAAAAAAAAAAAAAA"),
    ]


def test_codex_writes_aborted_for_an_unanswered_call() -> None:
    shown = _preview(SESSIONS / "codex_parallel_one_missing.jsonl")
    assert [m.calls or m.results for m in shown.messages if m.role != "user"] == [
        ("call_p1",),
        ("call_p2",),
        ("call_p2",),
        ("call_p1",),
        (),
    ]
    assert [m.results for m in shown.added] == [("call_p2",)]
    assert shown.valid


def test_codex_drops_an_output_of_no_call_and_keeps_duplicates() -> None:
    orphan = _preview(SESSIONS / "codex_orphan_output.jsonl")
    assert _drops(orphan) == [("result", "call_ghost")]
    duplicate = _preview(SESSIONS / "codex_dup_output_displaced.jsonl")
    assert [m.results for m in duplicate.messages if m.results] == [("call_d1",), ("call_d1",)]
    assert not duplicate.valid


@pytest.mark.parametrize("name", ["codex_compacted_history.jsonl", "codex_compacted_legacy.jsonl"])
def test_codex_starts_from_the_compacted_history(name: str) -> None:
    shown = _preview(SESSIONS / name)
    assert [m.texts for m in shown.messages[:3]] == [
        ("old prompt",),
        ("Summary of the old work.",),
        ("new prompt",),
    ]
    assert "call_old" not in [c for m in shown.messages for c in m.calls]


def test_codex_cannot_open_the_older_rollout_layout() -> None:
    shown = _preview(SESSIONS / "codex_old_layout.jsonl")
    assert shown.messages == []
    assert {d.what for d in shown.dropped} == {"record"} and len(shown.dropped) == 6


def test_request_messages_reduces_each_providers_body() -> None:
    anthropic = {
        "messages": [
            {"role": "user", "content": " hi \n"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hidden"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
        ]
    }
    assert request_messages("anthropic", anthropic) == [
        Message("user", ("hi",)),
        Message("assistant", calls=("t1",)),
        Message("user", results=("t1",)),
    ]
    responses = {
        "input": [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "x"}],
            },
        ]
    }
    assert request_messages("openai_responses", responses) == [
        Message("assistant", calls=("c1",)),
        Message("tool", results=("c1",)),
        Message("developer", ("x",)),
    ]
    with pytest.raises(ValueError, match="unknown provider"):
        request_messages("nope", {})
    with pytest.raises(ValueError, match="no 'messages' list"):
        request_messages("anthropic", {})


def test_an_id_anthropic_refuses_makes_the_preview_rejected_as_check_says() -> None:
    # An id carried over from an OpenAI model: Anthropic answers 400 on its pattern.
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "list the files"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "tool_use", "id": "call_x|fc_y", "name": "Bash",
                                  "input": {"command": "ls"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": "s",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "call_x|fc_y", "content": "README.md"}]}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": "s",
         "message": {"id": "msg_2", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "One file."}]}},
    ]  # fmt: skip
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    transcript = formats.load(data, "s.jsonl")
    shown = preview(transcript)
    assert shown is not None and not shown.valid
    assert [v.tool_call_id for v in shown.violations] == ["call_x|fc_y"]
    assert shown.violations[0].error.endswith(
        ".tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    )
    body = {
        "messages": [
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_x|fc_y", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_x|fc_y", "content": "README.md"}]},
        ]
    }  # fmt: skip
    assert [v.error for v in check_request("anthropic", body)] == [
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    ]
