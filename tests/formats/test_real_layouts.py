"""The layouts agents and other tools really write: read, faults found, repaired, round-tripped.

Fixtures (tests/formats/fixtures/) are written in each agent's own layout,
studied from its session writer: Gemini CLI's legacy `.json` sessions, Codex's
direct rollout layout, Claude Code lines without the uuid chain, Cline's text
tool protocol, pi/OpenClaw calls with leftover `partialJson` and results
parented on a tool call id, and agent output streams (refused).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.formats.test_fuzz import check_repair
from transcripts.core.branch import live_context
from transcripts.core.model import Action
from transcripts.core.policy import INTERRUPTED_TEXT, custom
from transcripts.core.validate import validate
from transcripts.engine import PRESETS, analyze
from transcripts.formats import FORMATS, FormatError, load
from transcripts.formats.cline import TextPair, text_pairs
from transcripts.formats.source import FileSource
from transcripts.replay import Message, preview
from transcripts.replay.claude_code import NO_RESPONSE

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# fixture -> (format, [(fault kind, tool call id, record)])
EXPECTED = {
    "gemini_cli_legacy_healthy.json": ("gemini_cli_json", []),
    "gemini_cli_legacy_orphan.json": (
        "gemini_cli_json",
        [("missing_result", "run_shell_command-1753180381215-9a8b7c6d5e4f3", 5)],
    ),
    # Gemini CLI's loader keeps messages in a Map by id: a message written again after a
    # later prompt keeps its first place, so the rewind to that prompt leaves it (and its
    # unanswered call, the second write) in the conversation.
    "gemini_cli_rewritten_before_rewind.jsonl": (
        "gemini_cli",
        [("missing_result", "run_shell_command-1764756002000-7c1e", 4)],
    ),
    # A rewind to an id no message has drops every message before it.
    "gemini_cli_rewind_unknown_id.jsonl": ("gemini_cli", []),
    "codex_direct_healthy.jsonl": ("codex", []),
    "codex_direct_orphan.jsonl": (
        "codex",
        [("missing_result", "call_Vb6nQ2sD8fG4hJ1kL3zX5cM7", 8)],
    ),
    "codex_direct_header_only.jsonl": (
        "codex",
        [("missing_result", "call_Q1w2E3r4T5y6U7i8O9p0A1s2", 3)],
    ),
    "claude_code_no_chain_healthy.jsonl": ("claude_code", []),
    "claude_code_no_chain_orphan.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Sm9tW4oX7zC0dF3gJ6kM8r", 6)],
    ),
    "claude_code_trimmed_orphan.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Sm9tW4oX7zC0dF3gJ6kM8r", 5)],
    ),
    "claude_code_mixed_chain.jsonl": ("claude_code", []),
    # No line's parent is another line (the assistant line names itself): read in file
    # order, and its text after the call splits off without linking the file.
    "claude_code_no_chain_self_parented.jsonl": (
        "claude_code",
        [
            ("missing_result", "toolu_01Ld3Mf6Ng9Ph2Qj5Rk8Sm1T", 1),
            ("content_after_call", "toolu_01Ld3Mf6Ng9Ph2Qj5Rk8Sm1T", 1),
        ],
    ),
    # A tool_use line logged twice, the second copy last in the file: a repair is final
    # only if the result it writes after the first copy pairs on the next read.
    "claude_code_call_logged_twice.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Hb7Kq2Wm5Xr8Tz4Nc6Vd3F", 1)],
    ),
    "claude_code_sidechain_call_logged_twice.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Hb7Kq2Wm5Xr8Tz4Nc6Vd3F", 2)],
    ),
    # The last line, a tool result, on a branch of its own (re-rooted, or parented on the
    # prompt): dropped, it would hand the session to the branch holding the bare call.
    "claude_code_result_rerooted.jsonl": (
        "claude_code",
        [("orphaned_result", "toolu_01Pn4Rs7Tv0Wx3Yz6Ab9Cd2E", 2)],
    ),
    "claude_code_result_sibling_of_call.jsonl": (
        "claude_code",
        [("orphaned_result", "toolu_01Pn4Rs7Tv0Wx3Yz6Ab9Cd2E", 3)],
    ),
    "claude_code_only_an_orphaned_result.jsonl": (
        "claude_code",
        [("orphaned_result", "toolu_01Pn4Rs7Tv0Wx3Yz6Ab9Cd2E", 0)],
    ),
    # A result line written before its call's line, parented on the message's thinking
    # line, and the message's second call unanswered: the synthetic result must not hang
    # off the re-attached result, which the leaf's walk never reaches.
    "claude_code_result_before_its_call.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Dn9qBBL5f6tpCFQ1EG4E1n_sc", 4)],
    ),
    # The same main chain, complete, and a subagent's unanswered call after it: the file's
    # main lines end at the call line, and the re-attached result is no leaf to move last.
    "claude_code_result_before_its_call_then_subagent.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Gr8Lk2Mn4Bv6Cx8Zq0Wp3T", 5)],
    ),
    # A subagent's assistant line written twice under one prompt (a retry), in the main
    # session's file: its sidechain ends at the second, whose call is unanswered.
    "claude_code_sidechain_call_retried.jsonl": (
        "claude_code",
        [("missing_result", "toolu_01Hb7Kq2Wm5Xr8Tz4Nc6Vd3F", 3)],
    ),
    # pi results written before their call's entry, one parented on it: the synthetic
    # results for the other calls follow that one, and are written last as the leaf.
    "openclaw_results_before_their_call.jsonl": (
        "openclaw",
        [("missing_result", f"toolu_01A0{k}xxxxxxxxxxxxxxxxxxx", 6) for k in range(2, 6)],
    ),
    "cline_text_results/api_conversation_history.json": ("cline", []),
    "cline_interrupted/api_conversation_history.json": ("cline", []),
    "cline_native_text_results/api_conversation_history.json": ("cline", []),
    "openclaw_partial_json_completed.jsonl": ("openclaw", []),
    # pi cuts its branch at a result whose parentId names the call's id (issue 12).
    "openclaw_result_parented_on_call_id.jsonl": (
        "openclaw",
        [
            ("displaced_result", "toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L", 4),
            ("displaced_result", "toolu_01Kj9Hg8Fe7Dc6Ba5Zy4Xw3V", 6),
        ],
    ),
    "openclaw_partial_json_orphan.jsonl": (
        "openclaw",
        [("missing_result", "toolu_01Qw2Er3Ty4Ui5Op6As7Df8G", 3)],
    ),
    # Calls of an OpenAI Responses model (`call_…|fc_…` ids), then a switch to Claude:
    # pi rewrites another model's ids into Anthropic's alphabet when it resumes.
    "openclaw_model_switch_openai_ids.jsonl": ("openclaw", []),
}
HEALTHY = sorted(name for name, (_, faults) in EXPECTED.items() if not faults)
FAULTY = sorted(name for name, (_, faults) in EXPECTED.items() if faults)


def _read(name: str) -> tuple[bytes, str]:
    path = FIXTURES / name
    return path.read_bytes(), path.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_it_reads_the_layout_and_finds_exactly_its_faults(name: str) -> None:
    data, filename = _read(name)
    result = analyze(data, filename)
    fmt, faults = EXPECTED[name]
    assert result.error is None
    assert result.format == fmt
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == faults


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("name", HEALTHY)
def test_a_healthy_file_round_trips_byte_for_byte(name: str, policy: str) -> None:
    data, filename = _read(name)
    result = analyze(data, filename, policy)
    assert not result.plan
    assert result.repaired == data


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("name", FAULTY)
def test_a_faulty_file_is_repaired_validly_and_to_itself(name: str, policy: str) -> None:
    data, filename = _read(name)
    check_repair(data, filename, policy)
    result = analyze(data, filename, policy)
    # A preset that keeps a fault (openmaic an orphaned result, as OpenMAIC does) leaves
    # what the provider refuses, and may have nothing to change.
    assert (result.repaired != data) == bool(result.plan)
    kept = [f for f in result.faults if PRESETS[policy].action(f.kind) is Action.KEEP]
    if not kept:
        assert validate(load(result.repaired, filename)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_file_sniffs_alone_as_its_format(name: str) -> None:
    """Read under another name, the file is still its format: its content says so."""
    data, filename = _read(name)
    other = "session.json" if filename.endswith(".json") else "session.jsonl"
    assert analyze(data, other).format == EXPECTED[name][0]


def test_a_legacy_gemini_session_gets_its_result_on_the_call_in_the_clis_own_style() -> None:
    data, filename = _read("gemini_cli_legacy_orphan.json")
    cancelled = "[Operation Cancelled] Reason: User did not allow tool call"
    # Gemini CLI's own file: the default answers in its own words; a policy with a text
    # of its own (a workspace's) writes an error.
    receipt = custom("receipt", {"missing_result": "synthesize"}, INTERRUPTED_TEXT)
    for policy, status, text in [
        ("native", "cancelled", cancelled),
        ("synthesize", "cancelled", cancelled),
        (receipt, "error", INTERRUPTED_TEXT),
    ]:
        out = analyze(data, filename, policy).repaired
        call = json.loads(out)["messages"][5]["toolCalls"][0]
        assert list(call)[:5] == ["id", "name", "args", "result", "status"]
        assert call["status"] == status
        assert call["result"] == [
            {
                "functionResponse": {
                    "id": "run_shell_command-1753180381215-9a8b7c6d5e4f3",
                    "name": "run_shell_command",
                    "response": {"error": text},
                }
            }
        ]
        # Only the call's own lines change, written as JSON.stringify(x, null, 2) writes them.
        before, after = data.decode().splitlines(), out.decode().splitlines()
        assert after[:104] == before[:104] and after[-12:] == before[-12:]
        assert '          "result": [\n            {\n' in out.decode()
        assert not out.endswith(b"\n")


def test_a_legacy_gemini_call_with_a_final_status_but_no_result_is_an_orphan() -> None:
    doc = json.loads(_read("gemini_cli_legacy_healthy.json")[0])
    call = doc["messages"][1]["toolCalls"][0]
    call["result"] = None  # the CLI then sends its functionCall with no functionResponse
    data = json.dumps(doc, indent=2).encode()
    result = analyze(data, "session-2025-07-22T10-31-9f4c1a2e.json")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("missing_result", "read_file-1753180312004-4b1c2e0f9a7d8")
    ]


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        (
            "gemini_cli_rewritten_before_rewind.jsonl",
            [
                Message("user", ("Now push it.",)),
                Message("assistant", calls=("run_shell_command-1764756002000-7c1e",)),
            ],
        ),
        ("gemini_cli_rewind_unknown_id.jsonl", [Message("user", ("Start again.",))]),
    ],
)
def test_check_and_the_gemini_cli_resume_agree_on_rewritten_and_rewound_messages(
    name: str, messages: list[Message]
) -> None:
    """Gemini CLI 0.61.0 loads these as `messages` (its `loadConversationRecord`, run on them)."""
    data, filename = _read(name)
    resumed = preview(load(data, filename))
    assert resumed is not None
    assert resumed.messages == messages
    assert [v.tool_call_id for v in resumed.violations] == [
        f.tool_call_id for f in analyze(data, filename).faults
    ]


def test_a_gemini_cli_session_with_messages_is_not_taken_for_another_message_array() -> None:
    data, _ = _read("gemini_cli_legacy_healthy.json")
    assert analyze(data, "chat.json").format == "gemini_cli_json"
    assert analyze(data.replace(b'"projectHash"', b'"project"'), "chat.json").error is not None


def test_a_chainless_claude_code_repair_adds_no_link() -> None:
    for name in ("claude_code_no_chain_orphan.jsonl", "claude_code_trimmed_orphan.jsonl"):
        data, filename = _read(name)
        out = analyze(data, filename).repaired.splitlines()
        new = [json.loads(line) for line in out if line not in data.splitlines()]
        assert len(new) == 1
        assert "uuid" not in new[0] and "parentUuid" not in new[0]
        assert new[0]["message"]["content"][0]["tool_use_id"] == "toolu_01Sm9tW4oX7zC0dF3gJ6kM8r"
        assert len(out) == len(data.splitlines()) + 1


@pytest.mark.parametrize("subagent", [False, True])
def test_a_call_logged_twice_is_answered_once_or_dropped_with_its_copy(subagent: bool) -> None:
    data, filename = _read("claude_code_sidechain_call_logged_twice.jsonl")
    if subagent:  # the subagent's own agent-*.jsonl: every line a sidechain's
        data = data.replace(b'"isSidechain":false', b'"isSidechain":true')
    native = analyze(data, filename, "native").repaired.splitlines()
    assert len(native) == 5
    assert json.loads(native[3])["parentUuid"] == json.loads(native[2])["uuid"]
    assert native[4] == data.splitlines()[3]
    discard = analyze(data, filename, "discard").repaired
    assert discard.splitlines() == data.splitlines()[:2]


@pytest.mark.parametrize("policy", ["synthesize", "discard"])
@pytest.mark.parametrize(
    "name, sent",
    [
        ("claude_code_result_rerooted.jsonl", []),
        ("claude_code_result_sibling_of_call.jsonl", [Message("user", ("Run the tests.",))]),
        ("claude_code_only_an_orphaned_result.jsonl", []),
    ],
)
def test_an_orphaned_result_ending_the_session_leaves_its_line_and_branch(
    name: str, sent: list[Message], policy: str
) -> None:
    # Claude Code 2.1.328 resumes each repaired file on the branch the raw one ends (it
    # sends what `sent` lists, then "No response requested."); dropping the line would
    # make it resume the bare call's branch, or, for the one line, find no conversation.
    data, filename = _read(name)
    result = analyze(data, filename, policy)
    before, after = data.splitlines(), result.repaired.splitlines()
    assert after[:-1] == before[:-1]
    last = json.loads(after[-1])
    assert last["message"]["content"] == []
    assert "toolUseResult" not in last
    assert {k: v for k, v in last.items() if k not in ("message", "toolUseResult")} == {
        k: v for k, v in json.loads(before[-1]).items() if k not in ("message", "toolUseResult")
    }
    shown = preview(load(result.repaired, filename))
    assert shown is not None and shown.valid
    assert shown.messages == [*sent, Message("assistant", (NO_RESPONSE,))]


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_a_split_in_a_chainless_claude_code_file_adds_no_link(policy: str) -> None:
    data, filename = _read("claude_code_no_chain_self_parented.jsonl")
    result = analyze(data, filename, policy)
    before = {line.get("uuid") for line in map(json.loads, data.splitlines())}
    after = [json.loads(line) for line in result.repaired.splitlines()]
    assert {line.get("uuid") for line in after} - before <= {None}
    assert not load(result.repaired, filename).tree


@pytest.mark.parametrize("subagent", [False, True])
def test_a_result_for_a_call_after_a_reattached_result_joins_the_branch(subagent: bool) -> None:
    data, filename = _read("claude_code_result_before_its_call.jsonl")
    if subagent:  # the subagent's own agent-*.jsonl: every line a sidechain's
        data = data.replace(b'"isSidechain":false', b'"isSidechain":true')
    result = analyze(data, filename, "synthesize")
    again = analyze(result.repaired, filename, "synthesize")
    assert again.faults == [] and not again.plan
    # The real output of the first call is still sent, and the synthetic result hangs
    # off the second call's line.
    lines = [json.loads(line) for line in result.repaired.splitlines()]
    sent = [lines[i] for i in live_context(again.transcript)]
    answered = [
        b["tool_use_id"]
        for o in sent
        if o["type"] == "user"
        for b in o["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert sorted(answered) == [
        "toolu_01Dn9qBBL5f6tpCFQ1EG4E1n_sc",
        "toolu_01dBHc1ln86MRVeWr80jxNfd_sc",
    ]
    synthetic = next(o for o in lines if o["uuid"] not in data.decode())
    assert synthetic["parentUuid"] == json.loads(data.splitlines()[4])["uuid"]


@pytest.mark.parametrize("policy", ["native", "discard"])
def test_a_result_reattached_after_the_leaf_is_not_moved_to_the_end(policy: str) -> None:
    data, filename = _read("claude_code_result_before_its_call_then_subagent.jsonl")
    result = analyze(data, filename, policy)
    # Only the subagent's lines change: the main chain is written as it was, in place.
    assert result.repaired.splitlines()[:4] == data.splitlines()[:4]
    again = analyze(result.repaired, filename, policy)
    assert again.faults == [] and not again.plan


def test_a_sidechain_leaf_emptied_by_a_repair_keeps_its_sidechain() -> None:
    data, filename = _read("claude_code_sidechain_call_retried.jsonl")
    result = analyze(data, filename, "discard")
    lines = result.repaired.splitlines()
    # Dropped, the line would hand the sidechain to the first try's unchecked call.
    assert lines[:3] == data.splitlines()[:3]
    assert json.loads(lines[3])["message"]["content"] == []
    again = analyze(result.repaired, filename, "discard")
    assert again.faults == [] and not again.plan


def test_a_claude_code_line_no_chain_reaches_is_kept_but_not_sent() -> None:
    data, filename = _read("claude_code_mixed_chain.jsonl")
    transcript = load(data, filename)
    assert transcript.tree
    assert live_context(transcript) == [0, 1, 2, 3]


def test_a_claude_code_chainless_sidechain_is_not_part_of_the_conversation() -> None:
    data, filename = _read("claude_code_no_chain_healthy.jsonl")
    lines = data.decode().splitlines()
    side = json.loads(lines[2])
    side["isSidechain"] = True
    side["message"]["content"][1]["id"] = "toolu_01Side0000000000000000"
    text = "\n".join([*lines, json.dumps(side, separators=(",", ":"))]) + "\n"
    result = analyze(text.encode(), filename)
    assert result.faults == []


def test_cline_text_tool_calls_pair_with_their_text_results_and_are_no_fault() -> None:
    data, filename = _read("cline_text_results/api_conversation_history.json")
    result = analyze(data, filename)
    assert result.provider == "anthropic"
    assert result.transcript is not None
    assert text_pairs(result.transcript) == [
        TextPair("read_file", 1, 2),
        TextPair("execute_command", 3, 4),
        TextPair("attempt_completion", 5, None),
    ]
    assert [r.kind for r in result.transcript.records][1:3] == [
        "assistant/read_file",
        "user/read_file result",
    ]
    interrupted = analyze(*_read("cline_interrupted/api_conversation_history.json"))
    assert interrupted.transcript is not None
    assert text_pairs(interrupted.transcript)[-1] == TextPair("replace_in_file", 3, None)
    assert interrupted.faults == [] and not interrupted.plan


def test_a_native_cline_call_answered_by_clines_result_text_is_paired() -> None:
    data, filename = _read("cline_native_text_results/api_conversation_history.json")
    transcript = load(data, filename)
    reply = transcript.records[2]
    assert [(r.tool_call_id, r.block) for r in reply.results] == [
        ("toolu_01Ncl4Ab7Cd0Ef3Gh6Ij9Kl2", 0)
    ]
    assert reply.other_blocks == 2
    assert validate(transcript) == []
    # Without Cline's header the same reply answers nothing: the call is unanswered.
    doc = json.loads(data)
    doc[2]["content"][0]["text"] = "Output follows."
    result = analyze(json.dumps(doc).encode(), filename)
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("missing_result", "toolu_01Ncl4Ab7Cd0Ef3Gh6Ij9Kl2")
    ]


def test_a_cline_file_with_native_tool_use_keeps_anthropics_rules() -> None:
    sample = FIXTURES.parents[2] / "demo" / "samples" / "formats"
    data = (sample / "cline_api_conversation_history.json").read_bytes()
    result = analyze(data, "api_conversation_history.json")
    assert result.format == "cline"
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("missing_result", "toolu_01LLLLLLLLLLLLLLLLLLLLLL")
    ]


def test_six_completed_pi_calls_with_leftover_partial_json_keep_their_results() -> None:
    data, filename = _read("openclaw_partial_json_completed.jsonl")
    transcript = load(data, filename)
    calls = [c for r in transcript.records for c in r.calls]
    assert len(calls) == 6 and all(c.problem == "" for c in calls)
    assert analyze(data, filename).repaired == data


def _pi_call(block: dict, result_text: str | None) -> bytes:
    lines: list[dict] = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "message": {"role": "user", "content": "."},
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "message": {"role": "assistant", "content": [block], "stopReason": "toolUse"},
        },
    ]
    if result_text is not None:
        content = [{"type": "text", "text": result_text}] if result_text else []
        lines.append(
            {
                "type": "message",
                "id": "r1",
                "parentId": "a1",
                "message": {
                    "role": "toolResult",
                    "toolCallId": block["id"],
                    "toolName": "exec",
                    "content": content,
                    "isError": not result_text,
                },
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_a_pi_call_is_malformed_only_when_its_arguments_are_unusable_and_unanswered() -> None:
    cut = {"type": "toolCall", "id": "t1", "name": "exec", "partialJson": '{"cmd":"ru'}
    whole = dict(cut, arguments={"cmd": "ru"})
    kinds = {
        "whole args, no result": (_pi_call(whole, None), ["missing_result"]),
        "cut args, no result": (_pi_call(cut, None), ["malformed_call", "missing_result"]),
        "cut args, a result with content": (_pi_call(cut, "ran: 3 files"), []),
        "cut args, an empty error result": (_pi_call(cut, ""), []),
    }
    for label, (data, expected) in kinds.items():
        assert [str(f.kind) for f in analyze(data, "p.jsonl").faults] == expected, label


def test_an_openclaw_result_parented_on_its_call_id_stays_on_the_branch() -> None:
    data, filename = _read("openclaw_result_parented_on_call_id.jsonl")
    transcript = load(data, filename)
    assert transcript.records[4].parent == "d4000001"
    assert transcript.records[4].relinked_from == "toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L"
    assert live_context(transcript) == list(range(1, 8))
    # A repair elsewhere also writes the links the import would have made; the rest stays.
    lines = data.decode().splitlines()
    lines.insert(
        8,
        json.dumps(
            {
                "type": "message",
                "id": "d4000006",
                "parentId": "d4000005",
                "timestamp": "2026-02-11T08:15:09.000Z",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "toolCall",
                            "id": "toolu_01Late",
                            "name": "bash",
                            "arguments": {"command": "wc -l notes/*"},
                        }
                    ],
                    "stopReason": "toolUse",
                },
            },
            separators=(",", ":"),
        ),
    )
    faulty = ("\n".join(lines) + "\n").encode()
    result = analyze(faulty, filename)
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("displaced_result", "toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L"),
        ("displaced_result", "toolu_01Kj9Hg8Fe7Dc6Ba5Zy4Xw3V"),
        ("missing_result", "toolu_01Late"),
    ]
    relinked = (
        faulty.replace(b'"parentId":"toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L"', b'"parentId":"d4000001"')
        .replace(b'"parentId":"toolu_01Kj9Hg8Fe7Dc6Ba5Zy4Xw3V"', b'"parentId":"d4000003"')
        .splitlines()
    )
    assert result.repaired.splitlines()[:9] == relinked[:9]


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_an_openclaw_result_parented_on_its_call_id_is_relinked_in_the_file(policy: str) -> None:
    """pi walks `parentId` from the leaf and stops at the call's id: the repair writes the entry."""
    data, filename = _read("openclaw_result_parented_on_call_id.jsonl")
    result = analyze(data, filename, policy)
    first = result.faults[0]
    assert first.detail == (
        "its parentId names the call's id toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L, not the entry "
        "holding the call (record 3): pi's branch stops here and sends nothing before it"
    )
    # What pi's request, opening with that result, gets from Anthropic.
    assert first.error.startswith(
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L."
    )
    assert [(str(op.kind), op.record, op.anchor) for op in result.plan.ops] == [
        ("move_result", 4, 3),
        ("move_result", 6, 5),
    ]
    # Only the two parentId values change, every other byte stays.
    assert result.repaired == data.replace(
        b'"parentId":"toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L"', b'"parentId":"d4000001"'
    ).replace(b'"parentId":"toolu_01Kj9Hg8Fe7Dc6Ba5Zy4Xw3V"', b'"parentId":"d4000003"')
    again = analyze(result.repaired, filename, policy)
    assert again.faults == []
    assert not again.plan
    assert result.repaired_counts() == (again.record_count, {})
    assert all(r.relinked_from is None for r in load(result.repaired, filename).records)


def test_parallel_results_parented_on_their_call_ids_are_chained_as_pi_writes_them() -> None:
    """pi links parallel results one after another; two siblings would lose the first."""

    def entry(uid: str, parent: str | None, message: dict[str, object]) -> str:
        line = {"type": "message", "id": uid, "parentId": parent, "timestamp": "t"}
        return json.dumps(dict(line, message=message), separators=(",", ":"))

    def result(call_id: str, text: str) -> dict[str, object]:
        content = [{"type": "text", "text": text}]
        return {"role": "toolResult", "toolCallId": call_id, "toolName": "read", "content": content}

    calls = [{"type": "toolCall", "id": i, "name": "read", "arguments": {}} for i in ("x1", "y1")]
    lines = [
        json.dumps({"type": "session", "version": 3, "id": "s", "cwd": "/w"}),
        entry("u1", None, {"role": "user", "content": "read both"}),
        entry("a1", "u1", {"role": "assistant", "content": calls, "stopReason": "toolUse"}),
        entry("r1", "x1", result("x1", "X")),
        entry("r2", "y1", result("y1", "Y")),
        entry("a2", "r2", {"role": "assistant", "content": "both read", "stopReason": "stop"}),
    ]
    data = ("\n".join(lines) + "\n").encode()
    analysis = analyze(data, "p.jsonl")
    assert [(str(f.kind), f.record) for f in analysis.faults] == [
        ("displaced_result", 3),
        ("displaced_result", 4),
    ]
    assert analysis.repaired == data.replace(b'"parentId":"x1"', b'"parentId":"a1"').replace(
        b'"parentId":"y1"', b'"parentId":"r1"'
    )
    assert not analyze(analysis.repaired, "p.jsonl").plan


@pytest.mark.parametrize(
    ("name", "tool", "where"),
    [
        (
            "stream_claude_p.jsonl",
            "`claude -p --output-format stream-json` (Claude Code)",
            "~/.claude/projects/-home-dev-shop/6a1d3f7e-2b9c-4d8e-a5f1-0c3b7e9d2a41.jsonl",
        ),
        (
            "stream_codex_exec.jsonl",
            "`codex exec --json` (Codex)",
            "~/.codex/sessions/YYYY/MM/DD/rollout-<time>-0199a3c2-7d4e-7f10-9b2a-5c6d7e8f9012.jsonl",
        ),
        (
            "stream_gemini.jsonl",
            "`gemini --output-format stream-json` (Gemini CLI)",
            "~/.gemini/tmp/<project>/chats/session-<time>-c81f4e2a.jsonl",
        ),
    ],
)
def test_an_agent_output_stream_is_refused_with_where_the_session_is(
    name: str, tool: str, where: str
) -> None:
    data, filename = _read(name)
    result = analyze(data, filename)
    assert not result.repairable
    assert result.error is not None
    assert tool in result.error and where in result.error
    assert "not a session file" in result.error
    with pytest.raises(FormatError) as caught:
        load(data, filename)
    assert caught.value.filename == filename
    first_json = next(k for k, line in enumerate(data.splitlines(), 1) if line.startswith(b"{"))
    assert caught.value.line == first_json


SAMPLES = FIXTURES.parents[2] / "demo" / "samples"
# Formats that specialise another, ordered before it: both sniffs accept their files.
SPECIALISES = {"cline": "anthropic"}


def _first_lines(path: Path) -> tuple[bool, list[object]]:
    text = path.read_text()
    try:
        return False, [json.loads(text)]
    except json.JSONDecodeError:
        parsed = []
        for line in text.splitlines():
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a stray stderr line
        return True, parsed[:50]


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p in [*SAMPLES.rglob("*.json*"), *FIXTURES.rglob("*.json*")]
        if ".expect" not in p.name
    ),
    ids=lambda p: p.name,
)
def test_no_two_formats_are_sure_of_one_file(path: Path) -> None:
    jsonl, sample = _first_lines(path)
    sure = [f.id for f in FORMATS.values() if f.jsonl == jsonl and f.sniff(sample, path.name)]
    for special, general in SPECIALISES.items():
        if special in sure and general in sure:
            sure.remove(general)
    assert len(sure) <= 1, sure
    result = analyze(path.read_bytes(), path.name)
    if sure:
        assert result.format == sure[0]
    elif path.name.startswith("stream_"):
        assert result.format == "unknown" and result.error is not None
    else:
        # Only what trimming tools leave of a Claude Code session needs the loose sniff, and
        # a session of one line, which reads as one JSON document too.
        assert result.format == "claude_code"
        assert path.name in (
            "claude_code_trimmed_orphan.jsonl",
            "claude_code_only_an_orphaned_result.jsonl",
        )


def test_claude_p_json_output_is_refused_as_what_it_is() -> None:
    result_line = json.loads(_read("stream_claude_p.jsonl")[0].splitlines()[-1])
    analysis = analyze(json.dumps(result_line).encode(), "out.json")
    assert analysis.error is not None
    assert "`claude -p --output-format json` (Claude Code)" in analysis.error
    assert "6a1d3f7e-2b9c-4d8e-a5f1-0c3b7e9d2a41.jsonl" in analysis.error


def test_a_pi_v1_session_without_ids_is_repaired_without_linking_its_lines() -> None:
    lines = [
        {
            "type": "session",
            "id": "3f2a9c1e-0b4d-4e6f-8a7b-9c0d1e2f3a4b",
            "cwd": "/w",
            "timestamp": "2025-06-01T10:00:00.000Z",
        },
        {
            "type": "message",
            "timestamp": "2025-06-01T10:00:01.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "ls"}]},
        },
        {
            "type": "message",
            "timestamp": "2025-06-01T10:00:02.000Z",
            "message": {
                "role": "assistant",
                "stopReason": "toolUse",
                "content": [
                    {
                        "type": "toolCall",
                        "id": "toolu_01V1",
                        "name": "bash",
                        "arguments": {"command": "ls"},
                    }
                ],
            },
        },
        {
            "type": "message",
            "timestamp": "2025-06-01T10:00:09.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "hello?"}]},
        },
    ]
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    transcript = load(data, "v1.jsonl")
    assert transcript.format == "openclaw" and not transcript.tree
    result = analyze(data, "v1.jsonl")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("missing_result", "toolu_01V1")
    ]
    out = result.repaired.splitlines()
    assert out[:3] == data.splitlines()[:3] and out[4:] == data.splitlines()[3:]
    assert json.loads(out[3])["message"]["toolCallId"] == "toolu_01V1"


def test_a_direct_codex_header_with_fields_of_later_versions_still_sniffs() -> None:
    data, _ = _read("codex_direct_header_only.jsonl")
    lines = data.decode().splitlines()
    header = json.loads(lines[0])
    header.update(instructions=None, cwd="/home/dev/ledger", originator="codex_cli_rs")
    text = "\n".join([json.dumps(header), *lines[1:]]) + "\n"
    assert analyze(text.encode(), "rollout.jsonl").format == "codex"
    # The events `codex exec --json` printed before 0.44 are no header.
    events = '{"id":"0","msg":{"type":"task_started"}}\n{"id":"0","msg":{"type":"agent_message"}}\n'
    assert "codex exec --json" in (analyze(events.encode(), "out.jsonl").error or "")


def test_gemini_json_output_is_refused_as_what_it_is() -> None:
    output = {
        "session_id": "c81f4e2a-9d3b-4a6c-8e1f-2b7d5a9c0e34",
        "response": "All three tests pass.",
        "stats": {"models": {}, "tools": {"totalCalls": 1}, "files": {}},
    }
    analysis = analyze(json.dumps(output, indent=2).encode(), "out.json")
    assert analysis.error is not None
    assert "`gemini --output-format json` (Gemini CLI)" in analysis.error
    assert "session-<time>-c81f4e2a.jsonl" in analysis.error


def test_a_pi_session_is_checked_for_the_provider_pi_resumes_it_with() -> None:
    # pi looks its model up by provider and id: a built-in provider's registry api wins
    # over the `api` an assistant message recorded (here "openai" with anthropic-messages).
    from transcripts.replay import preview

    path = SAMPLES / "cases" / "10_openclaw-displaced-dup-orphan-results.jsonl"
    data = path.read_bytes()
    assert b'"provider": "openai"' in data and b'"api": "anthropic-messages"' in data
    assert analyze(data, path.name).provider == "openai_responses"
    resumed = preview(load(data, path.name))
    assert resumed is not None and resumed.provider == "openai_responses"


def _pi_entry(entry_id: str, parent: str | None, **fields: object) -> dict[str, object]:
    return {"type": "message", "id": entry_id, "parentId": parent, **fields}


def _pi_assistant(entry_id: str, parent: str, provider: str, api: str) -> dict[str, object]:
    message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    message.update(provider=provider, api=api, model="m", stopReason="stop")
    return _pi_entry(entry_id, parent, message=message)


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        # /model after the last reply: pi resumes with the model_change's model.
        ([{"type": "model_change", "id": "mc", "parentId": "b", "provider": "openai"}], "openai"),
        # A provider outside pi's built-ins: its api is unknown, Anthropic as in the preview.
        ([{"type": "model_change", "id": "mc", "parentId": "b", "provider": "acme"}], "anthropic"),
        # An abandoned branch (c, a Gemini reply) written before the live one (d): the leaf's
        # path decides, not the last assistant message in the file.
        (
            [
                _pi_assistant("c", "b", "google", "google-generative-ai"),
                _pi_entry("d", "b", message={"role": "user", "content": "again"}),
            ],
            "anthropic",
        ),
    ],
    ids=["model-change", "unknown-provider", "abandoned-branch"],
)
def test_pi_is_checked_for_the_model_its_leafs_path_restores(
    tail: list[dict[str, object]], expected: str
) -> None:
    from transcripts.replay import preview

    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        _pi_entry("a", None, message={"role": "user", "content": "go"}),
        _pi_assistant("b", "a", "anthropic", "anthropic-messages"),
        *tail,
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    checked = analyze(data, "pi.jsonl")
    resumed = preview(load(data, "pi.jsonl"))
    assert resumed is not None
    assert checked.provider == resumed.provider
    assert checked.provider.startswith(expected)


def _pi_session(provider: str, api: str, turns: list[tuple[list[str], list[str]]]) -> bytes:
    """Return a pi session: per turn, an assistant message with calls, then their results."""
    lines: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        _pi_entry("u", None, message={"role": "user", "content": "go"}),
    ]
    parent = "u"
    for n, (calls, results) in enumerate(turns):
        blocks = [{"type": "toolCall", "id": c, "name": "read", "arguments": {}} for c in calls]
        message = {"role": "assistant", "content": blocks, "provider": provider, "api": api}
        message.update(model="m", stopReason="toolUse")
        lines.append(_pi_entry(f"a{n}", parent, message=message))
        parent = f"a{n}"
        for k, call_id in enumerate(results):
            result = {"role": "toolResult", "toolCallId": call_id, "toolName": "read"}
            result.update(content=[{"type": "text", "text": f"out {n}.{k}"}], isError=False)
            lines.append(_pi_entry(f"r{n}.{k}", parent, message=result))
            parent = f"r{n}.{k}"
    lines.append(_pi_assistant("done", parent, provider, api))
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_pi_on_gemini_sends_parallel_results_in_one_turn_so_they_are_healthy() -> None:
    # pi puts a turn's consecutive toolResult entries in one Gemini content: two entries
    # are no displaced result (the attacker's check flagged one, and its repair never
    # settled, writing the same bytes each time).
    from transcripts.replay import preview

    data = _pi_session("google", "google-generative-ai", [(["c_a", "c_b"], ["c_a", "c_b"])])
    checked = analyze(data, "pi.jsonl")
    assert (checked.provider, checked.faults, checked.plan.ops) == ("gemini", [], ())
    resumed = preview(load(data, "pi.jsonl"))
    assert resumed is not None and resumed.provider == "gemini" and resumed.valid


def test_pi_on_openai_responses_refuses_a_call_id_reused_by_a_later_turn() -> None:
    # OpenAI Responses wants each function_call to have exactly one output: an id a later
    # turn reuses is refused (check said healthy where the preview said refused).
    from transcripts.replay import preview

    data = _pi_session("openai", "openai-responses", [(["call_1"], ["call_1"])] * 2)
    checked = analyze(data, "pi.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in checked.faults] == [
        ("duplicate_call_id", "call_1", 4)
    ]
    assert checked.faults[0].error.startswith(
        "Duplicate function_call_output for call_id 'call_1'."
    )
    resumed = preview(load(data, "pi.jsonl"))
    assert resumed is not None and not resumed.valid
    assert resumed.violations[0].error == checked.faults[0].error
    # The repair renames the later pair; the agent's request is then accepted.
    again = analyze(checked.repaired, "pi.jsonl")
    assert again.faults == []
    fixed = preview(load(checked.repaired, "pi.jsonl"))
    assert fixed is not None and fixed.valid


def test_pi_on_openai_responses_names_a_second_output_of_one_call_a_duplicate() -> None:
    # A result logged twice: Responses refuses the second output as a duplicate of the
    # first ("Duplicate function_call_output"), not as an output with no call, which the
    # fault panel said while the resume verdict quoted the duplicate.
    from transcripts.replay import preview

    data = _pi_session("openai", "openai-responses", [(["call_1"], ["call_1", "call_1"])])
    checked = analyze(data, "pi.jsonl", grace=0)
    [fault] = checked.faults
    assert (str(fault.kind), fault.tool_call_id) == ("duplicate_result", "call_1")
    assert fault.error.startswith("Duplicate function_call_output for call_id 'call_1'.")
    resumed = preview(load(data, "pi.jsonl"))
    assert resumed is not None and not resumed.valid
    assert resumed.violations[0].error == fault.error


def _cc_lines(*specs: tuple[int, str | None, bool, str]) -> bytes:
    """Claude Code lines (n, parentUuid, isSidechain, timestamp), each a user prompt."""
    lines = [
        {
            "parentUuid": parent,
            "isSidechain": sidechain,
            "type": "user",
            "message": {"role": "user", "content": f"line {n}"},
            "uuid": f"c0ffee00-0000-4000-8000-{n:012d}",
            "sessionId": "5d3c9a1e-7f42-4b6e-8a19-3c2e4d5f6a7b",
            "timestamp": stamp,
        }
        for n, parent, sidechain, stamp in specs
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_a_claude_code_parent_no_line_holds_is_read_as_claude_codes_walk_reads_it(
    tmp_path: Path,
) -> None:
    """2.1.328's walk takes a missing parent as it takes a walked one (`lwn`: `!z||h.has(...)`).

    The parent is then the latest line before it in time, of the same side,
    at most 5 s older; a null parent is a root, nothing is looked for.
    """
    uid = "c0ffee00-0000-4000-8000-{:012d}".format
    data = _cc_lines(
        (1, None, False, "2026-03-02T09:20:00.000Z"),
        (2, uid(1), False, "2026-03-02T09:20:01.000Z"),
        (3, uid(2), True, "2026-03-02T09:20:02.000Z"),  # a sidechain line: not this side
        (4, uid(99), False, "2026-03-02T09:20:04.000Z"),  # names no line: under line 2
        (5, uid(98), False, "2026-03-02T09:20:10.000Z"),  # 6 s after line 4: a root
        (6, None, False, "2026-03-02T09:20:11.000Z"),  # null: a root
        (7, uid(97), True, "2026-03-02T09:20:05.000Z"),  # a sidechain's: under line 3
    )
    path = tmp_path / "5d3c9a1e-7f42-4b6e-8a19-3c2e4d5f6a7b.jsonl"
    path.write_bytes(data)
    whole = load(data, path.name).records
    with FileSource(path) as source:
        streamed = analyze(source, path.name).transcript
        assert streamed is not None
        stored = [(r.parent, r.relinked_from) for r in streamed.records]
    expected = [
        (None, None),
        (uid(1), None),
        (uid(2), None),
        (uid(2), uid(99)),
        (uid(98), None),
        (None, None),
        (uid(3), uid(97)),
    ]
    assert [(r.parent, r.relinked_from) for r in whole] == expected
    assert stored == expected


# The OpenAI Responses calls of openclaw_model_switch_openai_ids.jsonl (records 3 and 5).
OPENAI_IDS = [
    "call_Qm3Xz8Lr2Tn6Vb1Kc9Wd4Hs7|fc_68b2e4a1c3d05f7e0081a2b3c4d5e6f70123456789abcdef0",
    "call_Pk7Yw2Ne5Rj8Mf3Gt6Ax1Bz4|fc_68b2e4a1c3d05f7e0081a2b3c4d5e6f7fedcba9876543210f",
]
# What pi sends Claude for each: `|` made `_`, cut to 64 characters.
SENT_IDS = [
    "call_Qm3Xz8Lr2Tn6Vb1Kc9Wd4Hs7_fc_68b2e4a1c3d05f7e0081a2b3c4d5e6f",
    "call_Pk7Yw2Ne5Rj8Mf3Gt6Ax1Bz4_fc_68b2e4a1c3d05f7e0081a2b3c4d5e6f",
]


def _switched(edit: dict[int, dict]) -> bytes:
    """Return the model-switch fixture with the messages of `edit` ({line: fields}) changed."""
    data, _ = _read("openclaw_model_switch_openai_ids.jsonl")
    lines = [json.loads(line) for line in data.splitlines()]
    for index, fields in edit.items():
        lines[index]["message"].update(fields)
    return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)


def test_openai_call_ids_that_pi_rewrites_for_claude_are_no_fault() -> None:
    """pi rewrites the call ids another model wrote before it sends them: none is malformed.

    pi-ai 0.73.1 `transformMessages` (providers/transform-messages.js) passes
    each call id of an assistant message whose provider, api or model is not
    the target's through the converter's `normalizeToolCallId`, which for
    Anthropic (providers/anthropic.js) makes each character outside
    `[a-zA-Z0-9_-]` `_` and cuts the id to 64; each result after the call
    takes the new id. pi 0.73.1 resumes this very file against the agent
    tier's strict mock of Anthropic (tests/agents/test_pi.py), and its
    request, these ids in it, is accepted.
    Renaming them in the file would also lose the `fc_` item id pi's OpenAI
    Responses converter sends back should the session switch back to gpt-5.
    """
    data, filename = _read("openclaw_model_switch_openai_ids.jsonl")
    transcript = load(data, filename)
    assert transcript.provider == "anthropic"
    assert [c.id for r in transcript.records for c in r.calls][:2] == OPENAI_IDS
    assert transcript.rewritten_ids == {3, 5}
    result = analyze(data, filename)
    assert (result.faults, result.repaired) == ([], data)
    assert validate(transcript) == []
    resumed = preview(transcript)
    assert resumed is not None and resumed.valid
    assert [m.calls for m in resumed.messages if m.calls][:2] == [(SENT_IDS[0],), (SENT_IDS[1],)]
    assert [m.results for m in resumed.messages if m.results][:2] == [
        (SENT_IDS[0],),
        (SENT_IDS[1],),
    ]


def test_an_openai_call_id_in_a_message_of_the_model_pi_resumes_with_is_malformed() -> None:
    """pi sends the ids of the target model's own messages as written: Anthropic refuses `|`.

    transform-messages.js rewrites ids only when the message's provider, api
    and model are not all the target's (`isSameModel`). Resumed once
    against the agent tier's strict mock, pi 0.73.1 sent this id as it is
    and got Anthropic's 400; the repaired file was accepted.
    """
    claude = {"provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5"}
    data = _switched({3: claude})
    result = analyze(data, "s.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("malformed_call", OPENAI_IDS[0], 3)
    ]
    assert result.faults[0].error == (
        "messages.1.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    )
    check_repair(data, "s.jsonl", "synthesize")
    repaired = [json.loads(line) for line in result.repaired.splitlines()]
    renamed = repaired[3]["message"]["content"][1]["id"]
    assert renamed != OPENAI_IDS[0] and repaired[4]["message"]["toolCallId"] == renamed
    # The other OpenAI call is still rewritten by pi, and left as written.
    assert repaired[5]["message"]["content"][0]["id"] == OPENAI_IDS[1]


def test_an_openai_call_id_that_pi_would_rewrite_into_another_calls_id_is_malformed() -> None:
    """Rewritten, the id would be Claude's call's id too: two tool_use blocks with one id.

    Resumed once against the agent tier's strict mock, pi 0.73.1 got
    "`tool_use` ids must be unique"; the repaired file was accepted.
    """
    clash = SENT_IDS[0]
    lines = _switched({}).replace(b"toolu_01Vn4Bx7Mz2Lq5Kw8Jr3Ht6Gy", clash.encode())
    result = analyze(lines, "s.jsonl")
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("malformed_call", OPENAI_IDS[0], 3)
    ]
    check_repair(lines, "s.jsonl", "synthesize")


def test_a_rewritten_message_whose_kept_id_another_call_is_sent_as_is_not_taken_rewritten() -> None:
    """A call pi sends unchanged, and another call's rewritten id is it: neither message passes.

    Message 3 keeps a valid id that message 5's OpenAI id becomes once
    rewritten: pi would send two tool_use blocks with one id. The clash
    involves both messages, so neither is taken as rewritten (all its refused
    ids are renamed): a repair that renamed only message 5's left message 3's
    `|` id to pi, which a second reading then found in a clash with a renamed id.
    """
    call = {"type": "toolCall", "name": "bash", "arguments": {}}
    content = [{**call, "id": OPENAI_IDS[0]}, {**call, "id": SENT_IDS[1]}]
    data = _switched({3: {"content": content}})
    transcript = load(data, "s.jsonl")
    assert [c.id for c in transcript.records[3].calls] == [OPENAI_IDS[0], SENT_IDS[1]]
    assert transcript.rewritten_ids == frozenset()
    with FileSource.spooled([data]) as source:
        stored = load(source, "s.jsonl", summaries=False)
        assert stored.rewritten_ids == frozenset()
    check_repair(data, "s.jsonl", "synthesize")
