"""The runtime guard: OpenMAIC integrity (§2A), OpenClaw guard (§2E), PR #20980 (§2F)."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcripts.core.guard import (
    DIALECTS,
    AbortReport,
    InFlight,
    LeaseLostError,
    PairAtomicWriter,
    ToolCallRef,
    append_interrupted_results,
    is_fence_lost,
    orphaned_tool_calls,
    repair_tool_calls,
    with_integrity_repair,
)
from transcripts.core.policy import INTERRUPTED_TEXT

Message = dict[str, Any]

OPENCLAW_TEXT = (
    "[openclaw] missing tool result in session history; "
    "inserted synthetic error result for transcript repair."
)


def now() -> int:
    return 99


def user(text: str = "hello") -> Message:
    return {"role": "user", "content": text, "timestamp": 1}


def calls(*ids: str, stop: str = "toolUse", **extra: Any) -> Message:
    content = [{"type": "toolCall", "id": i, "name": f"tool_{i}", "arguments": {}} for i in ids]
    return {"role": "assistant", "content": content, "stopReason": stop, **extra}


def reply(text: str, stop: str = "stop", **extra: Any) -> Message:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": stop,
        **extra,
    }


def result(call_id: str, text: str = "ok", key: str = "toolCallId") -> Message:
    return {
        "role": "toolResult",
        key: call_id,
        "toolName": f"tool_{call_id}",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 2,
    }


def receipt(call_id: str, text: str = INTERRUPTED_TEXT) -> Message:
    """Return OpenMAIC's interrupted receipt for a `calls()` call, stamped 99."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": f"tool_{call_id}",
        "content": [{"type": "text", "text": text}],
        "details": {"ok": False, "error": "interrupted"},
        "isError": True,
        "timestamp": 99,
    }


def expect_integrity(messages: list[Message], dialect: Any = "pi") -> None:
    assert orphaned_tool_calls(messages, dialect=dialect) == []


def expect_original_subsequence(original: list[Message], repaired: list[Message]) -> None:
    """Assert every object of `original` appears in `repaired`, in the same order."""
    rest = iter(repaired)
    for message in original:
        assert any(m is message for m in rest), message


def snapshot(messages: list[Message]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in messages]


def read_jsonl(path: Path) -> list[Message]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class JsonlStore:
    """A durable append-only store: one JSON line per message, in a real file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, message: Message) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(message) + "\n")


# §2A: OpenMAIC tool-call-integrity.test.ts ----------------------------------


@pytest.mark.parametrize(
    ("messages", "repaired_ids"),
    [
        pytest.param([user(), calls("tail")], ["tail"], id="a trailing orphan"),
        pytest.param(
            [user(), calls("middle"), reply("later")], ["middle"], id="a middle-of-history orphan"
        ),
        pytest.param(
            [user(), calls("first"), calls("second"), calls("third")],
            ["first", "second", "third"],
            id="multiple consecutive orphans",
        ),
        pytest.param(
            [user(), calls("before-user"), user("next")],
            ["before-user"],
            id="an orphan followed by a new user message",
        ),
    ],
)
def test_it_repairs_orphans_without_reordering_or_rewriting_the_originals(
    messages: list[Message], repaired_ids: list[str]
) -> None:
    before = snapshot(messages)
    repair = repair_tool_calls(messages, now=now)
    assert repair.repaired_ids == repaired_ids
    expect_integrity(repair.messages)
    expect_original_subsequence(messages, repair.messages)
    assert snapshot(messages) == before
    for call_id in repaired_ids:
        position = next(
            i for i, m in enumerate(repair.messages) if calls(call_id)["content"] == m["content"]
        )
        assert repair.messages[position + 1] == receipt(call_id)


def test_it_repairs_partial_parallel_results_by_call_id_within_one_frame() -> None:
    done = result("done")
    messages = [user(), calls("done", "missing-a", "missing-b"), done, user("go on")]
    repair = repair_tool_calls(messages, now=now)
    assert repair.repaired_ids == ["missing-a", "missing-b"]
    out = repair.messages
    assert out[1] is messages[1]
    assert out[2] is done
    assert out[3:5] == [receipt("missing-a"), receipt("missing-b")]
    assert out[5] is messages[3]
    assert len(out) == 6
    expect_integrity(out)


def test_it_moves_a_late_parallel_result_back_before_the_aborted_frame() -> None:
    fast, slow = result("fast"), result("slow")
    aborted = reply("", stop="aborted", errorMessage="Request was aborted")
    messages = [user(), calls("fast", "slow"), fast, aborted, slow]
    repair = repair_tool_calls(messages, now=now)
    assert repair.repaired_ids == []
    assert repair.messages == [messages[0], messages[1], fast, slow]
    assert repair.messages[3] is slow
    assert not any(m is aborted for m in repair.messages)


def test_it_synthesizes_only_for_genuinely_missing_calls_when_late_results_coexist() -> None:
    done, late = result("done"), result("late")
    messages = [
        user(),
        calls("done", "late", "missing"),
        done,
        reply("interrupted tail", stop="aborted"),
        late,
    ]
    repair = repair_tool_calls(messages, now=now)
    assert repair.repaired_ids == ["missing"]
    assert repair.messages[2] is done
    assert repair.messages[3] is late
    assert repair.messages[4] == receipt("missing")
    assert repair.messages[4]["isError"] is True
    assert len(repair.messages) == 5


def test_it_returns_a_healthy_transcript_by_reference_byte_identical() -> None:
    messages = [user(), calls("a", "b"), result("b"), result("a"), reply("done")]
    before = json.dumps(messages)
    repair = repair_tool_calls(messages, now=now)
    assert repair.messages is messages
    assert repair.repaired_ids == []
    assert json.dumps(repair.messages) == before


def test_it_keeps_the_synthetic_result_when_a_transform_rematerializes_the_orphan() -> None:
    raw = [user(), calls("call_1")]
    view = repair_tool_calls(raw, now=now).messages
    assert len(view) == 3

    def from_raw_tree(messages: list[Message]) -> list[Message]:
        return list(raw)

    assert with_integrity_repair(from_raw_tree, now=now)(view) == [
        raw[0],
        raw[1],
        receipt("call_1"),
    ]


def test_it_reorders_a_late_parallel_result_when_a_transform_restores_raw_order() -> None:
    fast, late = result("fast"), result("late")
    raw = [
        user(),
        calls("fast", "late"),
        fast,
        {"role": "assistant", "content": [], "stopReason": "aborted"},
        late,
    ]

    def restore_raw(messages: list[Message]) -> list[Message]:
        return list(raw)

    out = with_integrity_repair(restore_raw, now=now)([])
    assert out == [raw[0], raw[1], fast, late]
    assert out[2] is fast and out[3] is late


def test_it_writes_an_interrupted_receipt_for_every_in_flight_call_at_abort(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path / "session.jsonl")
    in_flight = InFlight()
    assistant = calls("done", "aborted-a", "aborted-b")
    store.append(assistant)
    in_flight.track(assistant)
    store.append(result("done"))
    in_flight.settle("done")

    written = append_interrupted_results(
        store.append, in_flight.pending(), on_fence_lost=lambda: None, now=now
    )

    assert written == ["aborted-a", "aborted-b"]
    lines = read_jsonl(store.path)
    assert lines[2:] == [receipt("aborted-a"), receipt("aborted-b")]
    assert all("interrupted" in line["content"][0]["text"] for line in lines[2:])
    expect_integrity(lines)


def test_it_writes_nothing_for_a_zombie_run_whose_fence_was_lost() -> None:
    attempts: list[Message] = []
    fence_lost: list[bool] = []

    def fenced_append(message: Message) -> None:
        attempts.append(message)
        raise LeaseLostError("attempt 1 no longer holds the session lease")

    written = append_interrupted_results(
        fenced_append,
        [ToolCallRef("a", "bash"), ToolCallRef("b", "bash")],
        on_fence_lost=lambda: fence_lost.append(True),
        now=now,
    )
    assert written == []
    assert len(attempts) == 1
    assert fence_lost == [True]


def test_it_treats_a_storage_error_caused_by_a_lease_error_as_a_lost_fence() -> None:
    fence_lost: list[bool] = []

    def fenced_append(message: Message) -> None:
        raise OSError("append failed") from LeaseLostError("lease expired")

    written = append_interrupted_results(
        fenced_append,
        [ToolCallRef("a", "bash")],
        on_fence_lost=lambda: fence_lost.append(True),
    )
    assert written == []
    assert fence_lost == [True]


def test_it_treats_a_lease_error_in_the_context_chain_as_a_lost_fence() -> None:
    def fenced_append(message: Message) -> None:
        try:
            raise LeaseLostError("lease expired")
        except LeaseLostError:
            raise RuntimeError("storage write failed") from None

    fence_lost: list[bool] = []
    append_interrupted_results(
        fenced_append, [ToolCallRef("a", "bash")], on_fence_lost=lambda: fence_lost.append(True)
    )
    # `from None` hides the context from tracebacks but keeps it on the error.
    assert fence_lost == [True]


def test_it_stops_after_the_receipts_written_before_the_fence_was_lost(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "session.jsonl")
    fence_lost: list[bool] = []

    def append(message: Message) -> None:
        if message["toolCallId"] == "b":
            raise LeaseLostError("lease taken by attempt 2")
        store.append(message)

    refs = [ToolCallRef(i, f"tool_{i}") for i in ("a", "b", "c")]
    written = append_interrupted_results(
        append, refs, on_fence_lost=lambda: fence_lost.append(True), now=now
    )
    assert written == ["a"]
    assert read_jsonl(store.path) == [receipt("a")]
    assert fence_lost == [True]


def test_it_reraises_a_storage_error_that_is_not_a_lost_fence() -> None:
    fence_lost: list[bool] = []

    def append(message: Message) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        append_interrupted_results(
            append, [ToolCallRef("a", "bash")], on_fence_lost=lambda: fence_lost.append(True)
        )
    assert fence_lost == []


def test_it_walks_a_cyclic_cause_chain_without_looping() -> None:
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__cause__ = second
    second.__context__ = first
    assert is_fence_lost(first) is False
    lease = LeaseLostError("lease")
    second.__cause__ = lease
    assert is_fence_lost(first) is True


# More of OpenMAIC's rebuild (A3, A4) -----------------------------------------


def test_it_keeps_results_of_unknown_calls_in_place() -> None:
    stray = result("nobody-called-me")
    messages = [user(), stray, calls("a")]
    repair = repair_tool_calls(messages, now=now)
    assert repair.messages == [messages[0], stray, messages[2], receipt("a")]
    assert repair.messages[1] is stray


def test_it_returns_the_same_list_when_a_stray_result_trails_a_healthy_group() -> None:
    messages = [user(), calls("a"), result("a"), result("stray"), reply("done")]
    assert repair_tool_calls(messages).messages is messages


def test_it_keeps_the_first_of_duplicate_results_and_moves_it_before_a_user_message() -> None:
    first, second = result("a", "first"), result("a", "second")
    messages = [calls("a"), user("meanwhile"), first, second]
    repair = repair_tool_calls(messages)
    assert repair.messages == [messages[0], first, messages[1]]
    assert repair.messages[1] is first
    assert repair.repaired_ids == []


def test_it_drops_interrupted_frames_throughout_the_history_only_when_repairing() -> None:
    truncated = reply("cut off mid-sent", stop="length")
    failed = reply("", stop="stop", errorMessage="overloaded")
    healthy = [user(), truncated, failed, calls("a"), result("a")]
    assert repair_tool_calls(healthy).messages is healthy

    broken = [user(), truncated, failed, calls("a")]
    out = repair_tool_calls(broken, now=now).messages
    assert out == [broken[0], broken[3], receipt("a")]


def test_it_keeps_an_aborted_frame_with_calls_and_synthesizes_its_results() -> None:
    aborted = calls("a", stop="aborted", errorMessage="aborted by user")
    repair = repair_tool_calls([user(), aborted], now=now)
    assert repair.messages[1] is aborted
    assert repair.messages[2] == receipt("a")
    assert repair.repaired_ids == ["a"]


def test_it_pairs_tool_use_call_blocks_with_tool_use_id_results() -> None:
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "toolUse", "id": "u", "name": "read", "input": {}},
            {"type": "functionCall", "id": "f", "name": "exec", "arguments": {}},
        ],
    }
    messages = [assistant, result("u", key="toolUseId"), result("f", key="toolUseId")]
    assert orphaned_tool_calls(messages) == []
    assert repair_tool_calls(messages).messages is messages


def test_it_ignores_call_blocks_without_a_string_name() -> None:
    nameless = {"role": "assistant", "content": [{"type": "toolCall", "id": "x", "arguments": {}}]}
    assert orphaned_tool_calls([nameless]) == []
    assert repair_tool_calls([nameless]).repaired_ids == []


def test_it_uses_the_configured_text_and_clock() -> None:
    out = repair_tool_calls([calls("a")], now=lambda: 1234, text=OPENCLAW_TEXT).messages
    assert out[1]["content"] == [{"type": "text", "text": OPENCLAW_TEXT}]
    assert out[1]["timestamp"] == 1234


def test_it_repairs_openai_chat_messages() -> None:
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
        ],
    }
    answer = {"role": "tool", "tool_call_id": "call_2", "content": "README.md"}
    messages = [
        {"role": "user", "content": "hi"},
        assistant,
        {"role": "user", "content": "?"},
        answer,
    ]
    assert orphaned_tool_calls(messages, dialect="openai_chat") == [ToolCallRef("call_1", "ls")]
    repair = repair_tool_calls(messages, dialect="openai_chat")
    assert repair.repaired_ids == ["call_1"]
    assert repair.messages == [
        messages[0],
        assistant,
        {"role": "tool", "tool_call_id": "call_1", "content": INTERRUPTED_TEXT},
        answer,
        messages[2],
    ]
    assert repair_tool_calls(repair.messages, dialect="openai_chat").messages is repair.messages


def anthropic_calls(*ids: str) -> Message:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids],
    }


def tool_result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def test_it_repairs_anthropic_results_into_one_user_message() -> None:
    real = tool_result("a")
    note = {"type": "text", "text": "also, hurry"}
    answers = {"role": "user", "content": [real, note]}
    messages = [{"role": "user", "content": "go"}, anthropic_calls("a", "b"), answers]
    before = snapshot(messages)
    repair = repair_tool_calls(messages, dialect="anthropic")
    assert repair.repaired_ids == ["b"]
    synthetic = {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": INTERRUPTED_TEXT,
        "is_error": True,
    }
    assert repair.messages == [
        messages[0],
        messages[1],
        {"role": "user", "content": [real, synthetic]},
        {"role": "user", "content": [note]},
    ]
    assert repair.messages[2]["content"][0] is real
    assert snapshot(messages) == before
    expect_integrity(repair.messages, "anthropic")
    assert repair_tool_calls(repair.messages, dialect="anthropic").messages is repair.messages


def test_it_reuses_an_anthropic_result_message_that_holds_exactly_the_results() -> None:
    answers = {"role": "user", "content": [tool_result("a"), tool_result("b")]}
    interjection = {"role": "user", "content": "wait"}
    messages = [anthropic_calls("a", "b"), interjection, answers]
    repair = repair_tool_calls(messages, dialect="anthropic")
    assert repair.messages == [messages[0], answers, interjection]
    assert repair.messages[1] is answers
    assert repair.repaired_ids == []


def test_it_rejects_an_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        orphaned_tool_calls([], dialect="gemini")  # type: ignore[arg-type]


# In-flight tracking (OpenMAIC runner.ts; OpenClaw guard §2E) ----------------


def test_it_tracks_calls_in_order_until_they_are_settled() -> None:
    in_flight = InFlight()
    assert in_flight.track(calls("a", "b")) == [
        ToolCallRef("a", "tool_a"),
        ToolCallRef("b", "tool_b"),
    ]
    assert in_flight.track(calls("c", "a")) == [ToolCallRef("c", "tool_c")]
    assert in_flight.track(user()) == []
    assert in_flight.settle("b") is True
    assert in_flight.settle("b") is False
    assert [call.id for call in in_flight.pending()] == ["a", "c"]


@pytest.mark.parametrize("stop", ["aborted", "error"])
def test_it_writes_no_receipt_for_calls_of_a_failed_frame(stop: str, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "session.jsonl")
    in_flight = InFlight()
    assert in_flight.track(calls("partial", stop=stop)) == []
    fence_lost: list[bool] = []
    written = append_interrupted_results(
        store.append, in_flight.pending(), on_fence_lost=lambda: fence_lost.append(True)
    )
    assert written == []
    assert fence_lost == []
    assert read_jsonl(store.path) == []


# PR #20980 pair-atomic guard (§2F) and OpenClaw guard (§2E) ------------------


def test_case1_it_leaves_no_orphan_tool_use_after_an_abort_during_tool_execution(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, dialect="anthropic")
    writer.append(anthropic_calls("toolu_1"))
    assert writer.pending_ids() == ["toolu_1"]
    assert read_jsonl(path) == []
    writer.abort("tool_execution_aborted")
    assert read_jsonl(path) == []
    assert writer.last_abort == AbortReport("tool_execution_aborted", 1, 0)
    assert writer.pending_ids() == []


def test_case2_it_discards_a_pair_on_failover_and_flushing_again_does_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append(calls("a", "b"))
    writer.append(result("a"))
    writer.flush("model_failover")
    report = writer.last_abort
    assert report == AbortReport("model_failover", 2, 1)
    writer.flush("model_failover_again")
    writer.abort("and_again")
    assert writer.last_abort is report
    assert read_jsonl(path) == []


def test_case3_it_keeps_only_the_user_message_after_a_rate_limit_interruption(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append(user("list the repo"))
    writer.append(calls("a"))
    writer.abort("rate_limited")
    assert [line["role"] for line in read_jsonl(path)] == ["user"]


def test_case4_it_commits_a_normal_pair_in_order(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    messages = [user(), calls("a", "b"), result("b"), result("a"), reply("done")]
    writer.append(messages[0])
    writer.append(messages[1])
    writer.append(messages[2])
    assert read_jsonl(path) == [messages[0]]
    writer.append(messages[3])
    assert read_jsonl(path) == messages[:4]
    writer.append(messages[4])
    assert read_jsonl(path) == messages
    assert writer.last_abort is None


def test_case5_it_commits_the_first_pair_and_discards_the_aborted_second(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    for message in [calls("use1"), result("use1"), calls("use2")]:
        writer.append(message)
    writer.abort("user_aborted")
    lines = read_jsonl(path)
    assert lines == [calls("use1"), result("use1")]
    expect_integrity(lines)


def test_it_discards_a_pair_when_a_new_turn_starts_before_it_is_complete(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append(calls("a", "b"))
    writer.append(result("a"))
    with caplog.at_level(logging.WARNING, logger="transcripts.core.guard"):
        writer.append(user("never mind"))
    assert read_jsonl(path) == [user("never mind")]
    assert writer.last_abort == AbortReport("new_turn_before_pair_completed", 2, 1)
    assert "discard_reason=new_turn_before_pair_completed" in caplog.text
    assert "discarded_tool_use_count=2 discarded_tool_result_count=1" in caplog.text


def test_it_discards_a_new_call_frame_that_replaces_an_incomplete_pair(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append(calls("old"))
    writer.append(calls("new"))
    assert writer.last_abort == AbortReport("new_turn_before_pair_completed", 1, 0)
    assert writer.pending_ids() == ["new"]
    writer.append(result("new"))
    assert read_jsonl(path) == [calls("new"), result("new")]


def test_it_discards_a_pair_whose_results_do_not_match_its_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    with caplog.at_level(logging.WARNING, logger="transcripts.core.guard"):
        for message in [calls("a", "b"), result("a"), result("stray"), result("b")]:
            writer.append(message)
    assert read_jsonl(path) == []
    assert writer.last_abort == AbortReport("pair_validation_failed", 2, 3)
    assert "discard_reason=pair_validation_failed" in caplog.text


def test_it_writes_a_result_through_when_no_pair_is_held(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append(result("late"))
    assert read_jsonl(path) == [result("late")]


def test_it_writes_compact_utf8_lines(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path)
    writer.append({"role": "user", "content": "héllo ✓"})
    writer.append({"role": "assistant", "content": [], "stopReason": "stop"})
    assert (
        path.read_bytes()
        == (
            '{"role":"user","content":"héllo ✓"}\n'
            '{"role":"assistant","content":[],"stopReason":"stop"}\n'
        ).encode()
    )


def test_it_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text('{"type":"session"}\n', encoding="utf-8")
    writer = PairAtomicWriter(path)
    writer.append(calls("a"))
    writer.append(result("a"))
    assert read_jsonl(path) == [{"type": "session"}, calls("a"), result("a")]


def test_it_persists_a_synthetic_result_before_the_next_assistant_in_synthesize_mode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, on_abort="synthesize", now=now)
    writer.append(calls("a"))
    writer.flush("run_ended")
    writer.append(reply("next turn"))
    assert read_jsonl(path) == [calls("a"), receipt("a"), reply("next turn")]
    assert writer.last_abort == AbortReport("run_ended", 0, 0, ("a",))


def test_it_inserts_a_synthetic_result_before_an_error_reply_when_pending(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, on_abort="synthesize", now=now, text=OPENCLAW_TEXT)
    error = reply("", stop="error", errorMessage="529 overloaded")
    writer.append(calls("call_1"))
    writer.append(error)
    lines = read_jsonl(path)
    assert lines == [calls("call_1"), receipt("call_1", OPENCLAW_TEXT), error]
    assert "missing tool result" in lines[1]["content"][0]["text"]


def test_it_preserves_order_with_multiple_calls_and_partial_results(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, on_abort="synthesize", now=now)
    real = result("a", key="toolUseId")
    for message in [calls("a", "b"), real, reply("next")]:
        writer.append(message)
    assert read_jsonl(path) == [calls("a", "b"), real, receipt("b"), reply("next")]


@pytest.mark.parametrize("stop", ["aborted", "error"])
def test_it_never_synthesizes_for_calls_of_a_failed_frame(stop: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, on_abort="synthesize", now=now)
    failed = calls("partial", stop=stop)
    writer.append(failed)
    assert writer.pending_ids() == []
    writer.append(user("retry"))
    assert read_jsonl(path) == [failed, user("retry")]
    assert writer.last_abort is None


def test_it_synthesizes_anthropic_results_for_the_pending_calls(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    writer = PairAtomicWriter(path, on_abort="synthesize", dialect="anthropic")
    answer = {"role": "user", "content": [tool_result("a")]}
    writer.append(anthropic_calls("a", "b", "c"))
    writer.append(answer)
    writer.abort("tool_execution_aborted")
    synthetic = [
        {"type": "tool_result", "tool_use_id": i, "content": INTERRUPTED_TEXT, "is_error": True}
        for i in ("b", "c")
    ]
    lines = read_jsonl(path)
    assert lines == [anthropic_calls("a", "b", "c"), answer, {"role": "user", "content": synthetic}]
    expect_integrity(lines, "anthropic")


def test_it_rejects_an_unknown_abort_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="on_abort"):
        PairAtomicWriter(tmp_path / "s.jsonl", on_abort="ignore")  # type: ignore[arg-type]


# Property: repair over random pi histories -----------------------------------

call_ids = st.sampled_from(["a", "b", "c", "d"])
pi_messages = st.one_of(
    st.builds(user, st.sampled_from(["hi", "go on"])),
    st.builds(
        lambda stop, error: {
            "role": "assistant",
            "content": [{"type": "text", "text": "..."}],
            "stopReason": stop,
            **({} if error is None else {"errorMessage": error}),
        },
        st.sampled_from(["stop", "length", "aborted", "error"]),
        st.sampled_from([None, "", "  ", "boom"]),
    ),
    st.builds(
        lambda ids, stop, kind, named: {
            "role": "assistant",
            "content": [
                {"type": kind, "id": i, "arguments": {}, **({"name": f"t_{i}"} if named else {})}
                for i in ids
            ],
            "stopReason": stop,
        },
        st.lists(call_ids, min_size=1, max_size=3),
        st.sampled_from(["toolUse", "aborted", "error"]),
        st.sampled_from(["toolCall", "toolUse", "functionCall"]),
        st.sampled_from([True, True, True, False]),
    ),
    st.builds(
        lambda i, key: result(i, key=key),
        st.sampled_from(["a", "b", "c", "d", "stray"]),
        st.sampled_from(["toolCallId", "toolUseId"]),
    ),
)


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(pi_messages, max_size=12))
def test_it_repairs_any_pi_history_soundly_and_idempotently(messages: list[Message]) -> None:
    before = copy.deepcopy(messages)
    pi = DIALECTS["pi"]
    repair = repair_tool_calls(messages, now=now)
    out = repair.messages

    expect_integrity(out)
    again = repair_tool_calls(out, now=now)
    assert again.messages is out
    assert again.repaired_ids == []
    kept = [m for m in messages if m["role"] != "toolResult" and not pi.is_interrupted_frame(m)]
    expect_original_subsequence(kept, out)
    assert repair.repaired_ids == list(dict.fromkeys(c.id for c in orphaned_tool_calls(messages)))
    assert messages == before
