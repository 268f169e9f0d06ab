"""Runtime guard: the write side of the reference systems, as a pure-Python API.

Where the rest of the core inspects and repairs transcripts already on disk, this
module is for an agent runtime that wants to keep its own transcript sound while
it writes it (integrity-semantics.md §1A and §1B):

- `orphaned_tool_calls` and `repair_tool_calls` follow OpenMAIC's
  `tool-call-integrity.ts` (the read-time view repair), `with_integrity_repair` its
  `withToolCallIntegrityRepair`;
- `InFlight` and `append_interrupted_results` follow OpenMAIC's `runner.ts`
  (durable interrupted receipts, fenced by a storage lease);
- `PairAtomicWriter` follows OpenClaw's pair-atomic guard proposal (PR #20980) on top
  of `session-tool-result-guard.ts`.

Messages are plain dicts in one of three dialects (`DIALECTS`): "pi" (pi/OpenClaw
`AgentMessage`), "openai_chat" and "anthropic". Nothing here reads the clock on its
own: synthetic timestamps come from a `now` callable, which defaults to
`wall_clock_ms` only on the public entry points.
"""

from __future__ import annotations

import json
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from transcripts.core.jsontext import escape_lone
from transcripts.core.policy import INTERRUPTED_TEXT

logger = logging.getLogger(__name__)

Message: TypeAlias = dict[str, Any]
Now: TypeAlias = Callable[[], int]
DialectName: TypeAlias = Literal["pi", "openai_chat", "anthropic"]
AbortMode: TypeAlias = Literal["discard", "synthesize"]

NEW_TURN_BEFORE_PAIR_COMPLETED = "new_turn_before_pair_completed"
PAIR_VALIDATION_FAILED = "pair_validation_failed"


def wall_clock_ms() -> int:
    """Return the current time in epoch milliseconds, pi's `timestamp` unit.

    The default `now` of the public entry points; pass your own callable (OpenMAIC's
    tests use `lambda: 99`) for deterministic output.
    """
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ToolCallRef:
    """One tool call: its id and tool name."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolResultRef:
    """One tool result: the call id it answers and the object that carries it.

    `item` is the result message itself where each result is a message (pi, OpenAI
    Chat) and the `tool_result` block where results are blocks (Anthropic).
    """

    id: str
    item: Any


class Dialect(ABC):
    """How one message shape spells tool calls and tool results.

    A dialect lists the calls of a message, the results a message carries, and builds
    a synthetic result message. The defaults of `without_results` and `result_messages`
    suit dialects where every result is a message of its own; Anthropic, whose results
    are blocks inside a user message, overrides both.
    """

    name: str

    @abstractmethod
    def tool_calls(self, message: Message) -> list[ToolCallRef]:
        """Return the tool calls of `message`, in block order ([] for non-callers)."""

    @abstractmethod
    def tool_results(self, message: Message) -> list[ToolResultRef]:
        """Return the tool results `message` carries, in block order."""

    @abstractmethod
    def synthetic_result(self, call: ToolCallRef, *, text: str, now: Now) -> Message:
        """Return a new message carrying one error result for `call` with `text`."""

    def is_interrupted_frame(self, message: Message) -> bool:
        """Return whether `message` is an assistant frame cut short, with no tool calls."""
        return False

    def is_failed_frame(self, message: Message) -> bool:
        """Return whether `message` is an aborted or errored assistant frame."""
        return False

    def without_results(self, message: Message, ids: Set[str]) -> Message | None:
        """Return `message` less its results answering `ids`; None when nothing is left."""
        if any(result.id in ids for result in self.tool_results(message)):
            return None
        return message

    def result_messages(self, results: Sequence[tuple[ToolResultRef, Message]]) -> list[Message]:
        """Return the messages that carry `results` (result, carrier) in this order."""
        return [carrier for _, carrier in results]


def _blocks(message: Message, role: str) -> list[dict[str, Any]]:
    """Return the dict blocks of `message` when it has `role` and a list `content`."""
    content = message.get("content")
    if message.get("role") != role or not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


_PI_CALL_TYPES = frozenset({"toolCall", "toolUse", "functionCall"})
_PI_CUT_SHORT = frozenset({"aborted", "length", "error"})
_PI_FAILED = frozenset({"aborted", "error"})


class PiDialect(Dialect):
    """pi/OpenClaw `AgentMessage`: `toolCall` blocks, `toolResult` messages.

    Call blocks typed `toolUse`/`functionCall` and results keyed `toolUseId` are
    accepted as OpenClaw accepts them; a call needs a string id and a string name
    (OpenMAIC's rule, A1), else it is invisible and its result has no known owner.
    """

    name = "pi"

    def tool_calls(self, message: Message) -> list[ToolCallRef]:
        return [
            ToolCallRef(block["id"], block["name"])
            for block in _blocks(message, "assistant")
            if block.get("type") in _PI_CALL_TYPES
            and isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
        ]

    def tool_results(self, message: Message) -> list[ToolResultRef]:
        if message.get("role") != "toolResult":
            return []
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            call_id = message.get("toolUseId")
        return [ToolResultRef(call_id, message)] if isinstance(call_id, str) else []

    def synthetic_result(self, call: ToolCallRef, *, text: str, now: Now) -> Message:
        """Return OpenMAIC's interrupted receipt (A5) for `call`."""
        return {
            "role": "toolResult",
            "toolCallId": call.id,
            "toolName": call.name,
            "content": [{"type": "text", "text": text}],
            "details": {"ok": False, "error": "interrupted"},
            "isError": True,
            "timestamp": now(),
        }

    def is_interrupted_frame(self, message: Message) -> bool:
        """Return whether `message` is OpenMAIC's interrupted assistant frame (A4.2).

        An assistant with no tool calls whose `stopReason` is aborted, length or error,
        or whose `errorMessage` is a non-blank string.
        """
        if message.get("role") != "assistant" or self.tool_calls(message):
            return False
        error = message.get("errorMessage")
        return message.get("stopReason") in _PI_CUT_SHORT or (
            isinstance(error, str) and bool(error.strip())
        )

    def is_failed_frame(self, message: Message) -> bool:
        """Return whether `message` is an assistant with `stopReason` aborted or error.

        pi's `transformMessages` drops such frames from the provider payload, so a
        result for one of their calls would reach the provider without its call.
        """
        return message.get("role") == "assistant" and message.get("stopReason") in _PI_FAILED


class OpenAIChatDialect(Dialect):
    """OpenAI Chat Completions: `tool_calls[]` on the assistant, `role: "tool"` results."""

    name = "openai_chat"

    def tool_calls(self, message: Message) -> list[ToolCallRef]:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            return []
        refs = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if (
                isinstance(function, dict)
                and isinstance(call.get("id"), str)
                and isinstance(function.get("name"), str)
            ):
                refs.append(ToolCallRef(call["id"], function["name"]))
        return refs

    def tool_results(self, message: Message) -> list[ToolResultRef]:
        call_id = message.get("tool_call_id")
        if message.get("role") != "tool" or not isinstance(call_id, str):
            return []
        return [ToolResultRef(call_id, message)]

    def synthetic_result(self, call: ToolCallRef, *, text: str, now: Now) -> Message:
        return {"role": "tool", "tool_call_id": call.id, "content": text}


class AnthropicDialect(Dialect):
    """Anthropic Messages: `tool_use` blocks, `tool_result` blocks inside a user message."""

    name = "anthropic"

    def tool_calls(self, message: Message) -> list[ToolCallRef]:
        return [
            ToolCallRef(block["id"], block["name"])
            for block in _blocks(message, "assistant")
            if block.get("type") == "tool_use"
            and isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
        ]

    def tool_results(self, message: Message) -> list[ToolResultRef]:
        return [
            ToolResultRef(block["tool_use_id"], block)
            for block in _blocks(message, "user")
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str)
        ]

    def synthetic_result(self, call: ToolCallRef, *, text: str, now: Now) -> Message:
        return {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": True}
            ],
        }

    def without_results(self, message: Message, ids: Set[str]) -> Message | None:
        # The user message may also carry text or results of unknown calls: those stay,
        # in a copy, so the caller's message is never mutated.
        drop = {id(result.item) for result in self.tool_results(message) if result.id in ids}
        if not drop:
            return message
        kept = [block for block in message["content"] if id(block) not in drop]
        return {**message, "content": kept} if kept else None

    def result_messages(self, results: Sequence[tuple[ToolResultRef, Message]]) -> list[Message]:
        # All results of one assistant must sit in the next user message. Reuse the
        # original message when it carries exactly these blocks, so a repair keeps the
        # caller's objects wherever it can.
        blocks = [result.item for result, _ in results]
        carriers = {id(carrier): carrier for _, carrier in results}
        if len(carriers) == 1:
            (carrier,) = carriers.values()
            content = carrier.get("content")
            if (
                isinstance(content, list)
                and len(content) == len(blocks)
                and all(a is b for a, b in zip(content, blocks, strict=True))
            ):
                return [carrier]
        return [{"role": "user", "content": blocks}]


DIALECTS: Mapping[str, Dialect] = MappingProxyType(
    {d.name: d for d in (PiDialect(), OpenAIChatDialect(), AnthropicDialect())}
)


def get_dialect(dialect: DialectName | Dialect) -> Dialect:
    """Return the dialect named `dialect` (a `Dialect` is returned as is).

    Raises ValueError for an unknown name.
    """
    if isinstance(dialect, Dialect):
        return dialect
    try:
        return DIALECTS[dialect]
    except KeyError:
        raise ValueError(f"unknown dialect {dialect!r}; known: {sorted(DIALECTS)}") from None


def orphaned_tool_calls(
    messages: Sequence[Message], *, dialect: DialectName | Dialect = "pi"
) -> list[ToolCallRef]:
    """Return the tool calls that no result answers, in message then block order.

    Global and position-insensitive, like OpenMAIC's `orphanedToolCalls` (A2): a result
    anywhere, even before its call, answers it. Adjacency is not checked.
    """
    d = get_dialect(dialect)
    answered = {result.id for message in messages for result in d.tool_results(message)}
    return [call for m in messages for call in d.tool_calls(m) if call.id not in answered]


@dataclass(frozen=True, slots=True)
class GuardRepair:
    """What `repair_tool_calls` returns: the repaired view and the synthesized call ids."""

    messages: list[Message]
    repaired_ids: list[str]


def _distinct(calls: Iterable[ToolCallRef]) -> list[ToolCallRef]:
    """Return `calls` less later repeats of an id."""
    seen: dict[str, ToolCallRef] = {}
    for call in calls:
        seen.setdefault(call.id, call)
    return list(seen.values())


def _group_is_healthy(
    group: list[ToolCallRef], results: Sequence[list[ToolResultRef]], start: int, known: Set[str]
) -> bool:
    """Return whether the results from message `start` on answer a call group exactly (A3.2).

    `results` holds the results of each message. The run is the consecutive
    result-carrying messages; it ends early at a result no known call owns, because
    the rebuild leaves such results in place and would otherwise rebuild the same list
    again and again (see `repair_tool_calls`).
    """
    run: list[str] = []
    for found in islice(results, start, None):
        if not found:
            break
        owned = [r.id for r in found if r.id in known]
        run.extend(owned)
        if len(owned) < len(found):
            break
    ids = {call.id for call in group}
    return len(run) == len(ids) and set(run) == ids


def repair_tool_calls(
    messages: list[Message],
    *,
    dialect: DialectName | Dialect = "pi",
    now: Now = wall_clock_ms,
    text: str = INTERRUPTED_TEXT,
) -> GuardRepair:
    """Return the view of `messages` in which every tool call is answered right after it.

    OpenMAIC's `repairOrphanedToolCalls` (A3, A4). When every call group is followed by
    exactly its results and no call is unanswered, `messages` itself is returned (same
    list object) with no ids. Otherwise the view is rebuilt into a new list:

    - every result answering a known call is taken out, wherever it is;
    - interrupted assistant frames (pi: no calls, `stopReason` aborted/length/error or a
      non-blank `errorMessage`) are dropped, throughout the history;
    - right after each call group comes one result per distinct call id, in call order:
      the earliest result for that id, the very object, or else a synthetic error
      result with `text` stamped by `now()` (pi: OpenMAIC's receipt, A5);
    - results of no known call stay where they are; every other message keeps its
      relative order.

    `repaired_ids` lists the synthesized ids only (not moved or deduplicated results), in
    document order. The input list and its messages are never mutated; the output reuses
    them. A call id repeated across groups gets the same result (or synthetic) object in
    each group. Raises ValueError for an unknown dialect.

    One deviation from OpenMAIC, for idempotence: a result owned by no known call ends
    the run of results read after a group. OpenMAIC counts it in the run, so a group
    followed by its results and then a stray result is "unhealthy" forever and each
    repair returns a new, equal list.
    """
    d = get_dialect(dialect)
    calls = [d.tool_calls(m) for m in messages]
    results = [d.tool_results(m) for m in messages]
    known = {call.id for group in calls for call in group}
    answered = {result.id for found in results for result in found}
    healthy = known <= answered and all(
        _group_is_healthy(group, results, i + 1, known) for i, group in enumerate(calls) if group
    )
    if healthy:
        return GuardRepair(messages, [])

    first: dict[str, tuple[ToolResultRef, Message]] = {}
    for message, found in zip(messages, results, strict=True):
        for result in found:
            if result.id in known:
                first.setdefault(result.id, (result, message))
    out: list[Message] = []
    repaired: list[str] = []
    for message, group, found in zip(messages, calls, results, strict=True):
        if d.is_interrupted_frame(message):
            continue
        kept = d.without_results(message, known) if found else message
        if kept is not None:
            out.append(kept)
        if not group:
            continue
        distinct = _distinct(group)
        for call in distinct:
            if call.id not in first:
                synthetic = d.synthetic_result(call, text=text, now=now)
                first[call.id] = (d.tool_results(synthetic)[0], synthetic)
                repaired.append(call.id)
        out.extend(d.result_messages([first[call.id] for call in distinct]))
    return GuardRepair(out, repaired)


def with_integrity_repair(
    transform: Callable[[list[Message]], list[Message]],
    *,
    dialect: DialectName | Dialect = "pi",
    now: Now = wall_clock_ms,
    text: str = INTERRUPTED_TEXT,
) -> Callable[[list[Message]], list[Message]]:
    """Return `transform` with `repair_tool_calls` re-applied to its output.

    OpenMAIC's `withToolCallIntegrityRepair` (A6): read-time receipts are never
    persisted, so a context transform that rebuilds from the raw history would bring
    the orphan back; repairing after the transform keeps the view sound.
    """

    def repaired(messages: list[Message]) -> list[Message]:
        return repair_tool_calls(transform(messages), dialect=dialect, now=now, text=text).messages

    return repaired


class InFlight:
    """The tool calls a runtime has seen but not yet durably answered (OpenMAIC runner.ts).

    Calls of aborted or errored assistant frames are never tracked: pi drops those
    frames before the provider, so a receipt for their calls would be a result with no
    call, the "unexpected tool_use_id" 400 loop OpenClaw users hit (#4600, §1B B-3).
    """

    def __init__(self, *, dialect: DialectName | Dialect = "pi") -> None:
        self._dialect = get_dialect(dialect)
        self._calls: dict[str, ToolCallRef] = {}

    def track(self, message: Message) -> list[ToolCallRef]:
        """Add the calls of `message` (call at `message_end`); return the ones added.

        Ids already in flight keep their place. Results are ignored here: see `settle`.
        """
        if self._dialect.is_failed_frame(message):
            return []
        added = [call for call in self._dialect.tool_calls(message) if call.id not in self._calls]
        self._calls.update((call.id, call) for call in added)
        return added

    def settle(self, call_id: str) -> bool:
        """Remove `call_id`; return whether it was in flight.

        Call this only after the result's durable append has succeeded. Settling when
        the result is merely produced reopens the race OpenMAIC closed: if the append
        then fails or the run is interrupted, the call is neither answered on disk nor
        in flight, and no interrupted receipt is ever written for it.
        """
        return self._calls.pop(call_id, None) is not None

    def pending(self) -> list[ToolCallRef]:
        """Return the calls still in flight, in the order they were tracked."""
        return list(self._calls.values())


class LeaseLostError(Exception):
    """The storage lease (fence) of this run was lost: another attempt owns the session.

    Raise it, or chain it as the cause of a storage error, from an `append` callable so
    that `append_interrupted_results` stops writing for a zombie run.
    """


def is_fence_lost(error: BaseException) -> bool:
    """Return whether `error` or an error it was raised from is a `LeaseLostError`.

    Walks both `__cause__` and `__context__` links; each error is visited once, so a
    cyclic chain terminates.
    """
    stack: list[BaseException] = [error]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, LeaseLostError):
            return True
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def append_interrupted_results(
    append: Callable[[Message], object],
    calls: Iterable[ToolCallRef],
    *,
    on_fence_lost: Callable[[], object],
    dialect: DialectName | Dialect = "pi",
    now: Now = wall_clock_ms,
    text: str = INTERRUPTED_TEXT,
) -> list[str]:
    """Durably answer `calls` with interrupted receipts, one `append(message)` each.

    OpenMAIC's `appendInterruptedToolCallResults` (runner.ts): when an append raises an
    error whose cause/context chain holds a `LeaseLostError`, `on_fence_lost()` is
    called once and nothing more is written, since a run that lost its fence is a
    zombie and any write of it would corrupt the new owner's transcript. Any other
    error is re-raised. Return the ids whose receipts were appended, in order; the
    caller settles them in its `InFlight`.
    """
    d = get_dialect(dialect)
    written: list[str] = []
    for call in calls:
        try:
            append(d.synthetic_result(call, text=text, now=now))
        except Exception as error:
            if not is_fence_lost(error):
                raise
            on_fence_lost()
            break
        written.append(call.id)
    return written


@dataclass(frozen=True, slots=True)
class AbortReport:
    """What the last abort of a `PairAtomicWriter` did with its held pair.

    `discarded_calls` and `discarded_results` count tool calls and tool results dropped
    (both 0 when the pair was completed with `synthesized_ids` instead).
    """

    reason: str
    discarded_calls: int
    discarded_results: int
    synthesized_ids: tuple[str, ...] = ()


class PairAtomicWriter:
    """Append messages to a JSONL file so that a tool call never lands without its results.

    OpenClaw's pair-atomic guard (PR #20980, §1B B-4). An assistant message with tool
    calls is held back, with its results, until every call is answered; then the held
    messages are checked (the set of call ids equals the set of result ids) and written
    in one append. A non-result message arriving while a pair is incomplete aborts the
    pair first (reason `new_turn_before_pair_completed`). On abort, "discard" (the
    default) drops the held messages, so an interrupted tool turn vanishes from the
    file, assistant text included; "synthesize" completes the pair with synthetic error
    results and writes it. Results arriving with no pair held, and aborted or errored
    assistant frames (whose calls pi never sends), are written straight through.

    Lines are compact JSON, UTF-8, `ensure_ascii=False`. Raises ValueError for an unknown
    `on_abort` or dialect; `append` raises OSError when the file cannot be written
    (the held pair is dropped either way, so a retry never duplicates lines) and
    TypeError for a message JSON cannot encode (before anything is written).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        on_abort: AbortMode = "discard",
        dialect: DialectName | Dialect = "pi",
        now: Now = wall_clock_ms,
        text: str = INTERRUPTED_TEXT,
    ) -> None:
        if on_abort not in ("discard", "synthesize"):
            raise ValueError(f"on_abort must be 'discard' or 'synthesize', not {on_abort!r}")
        self.path = Path(path)
        self.on_abort = on_abort
        self._dialect = get_dialect(dialect)
        self._now = now
        self._text = text
        self._held: list[Message] = []
        self._pending: dict[str, ToolCallRef] = {}
        self.last_abort: AbortReport | None = None

    def pending_ids(self) -> list[str]:
        """Return the ids of held calls still waiting for a result, in call order."""
        return list(self._pending)

    def append(self, message: Message) -> None:
        """Write `message`, or hold it until its tool pair is complete."""
        d = self._dialect
        found = d.tool_results(message)
        if found:
            if not self._held:
                self._write([message])
                return
            self._held.append(message)
            for result in found:
                self._pending.pop(result.id, None)
            if not self._pending:
                self._commit()
            return
        if self._held:
            self.abort(NEW_TURN_BEFORE_PAIR_COMPLETED)
        calls = [] if d.is_failed_frame(message) else d.tool_calls(message)
        if not calls:
            self._write([message])
            return
        self._held = [message]
        self._pending = {call.id: call for call in calls}

    def abort(self, reason: str) -> None:
        """End the held pair, if any, as `on_abort` says; record it in `last_abort`.

        Idempotent: with no pair held this does nothing (and `last_abort` is kept).
        """
        if not self._held:
            return
        if self.on_abort == "discard":
            self._discard(reason)
            return
        d = self._dialect
        calls = list(self._pending.values())
        synthetic = [d.synthetic_result(call, text=self._text, now=self._now) for call in calls]
        self._held.extend(d.result_messages([(d.tool_results(m)[0], m) for m in synthetic]))
        self._pending = {}
        self.last_abort = AbortReport(reason, 0, 0, tuple(call.id for call in calls))
        self._commit()

    def flush(self, reason: str) -> None:
        """Same as `abort`, under the name OpenClaw's guard uses (`flushPendingToolResults`)."""
        self.abort(reason)

    def _commit(self) -> None:
        d = self._dialect
        call_ids = {call.id for m in self._held for call in d.tool_calls(m)}
        result_ids = {result.id for m in self._held for result in d.tool_results(m)}
        if call_ids != result_ids:
            self._discard(PAIR_VALIDATION_FAILED)
            return
        held, self._held, self._pending = self._held, [], {}
        self._write(held)

    def _discard(self, reason: str) -> None:
        d = self._dialect
        report = AbortReport(
            reason,
            sum(len(d.tool_calls(m)) for m in self._held),
            sum(len(d.tool_results(m)) for m in self._held),
        )
        self._held, self._pending = [], {}
        self.last_abort = report
        logger.warning(
            "pair-atomic guard discarded a tool turn: discard_reason=%s "
            "discarded_tool_use_count=%d discarded_tool_result_count=%d",
            report.reason,
            report.discarded_calls,
            report.discarded_results,
        )

    def _write(self, messages: list[Message]) -> None:
        # Encode everything first and append it with one write, so a crash or a
        # concurrent reader never sees a call without its results.
        data = "".join(
            escape_lone(json.dumps(m, ensure_ascii=False, separators=(",", ":"))) + "\n"
            for m in messages
        ).encode("utf-8")
        with self.path.open("ab") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
