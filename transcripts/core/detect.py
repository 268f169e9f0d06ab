"""Find the tool-call integrity faults of a transcript.

Pairing follows DESIGN.md: along the live branch of the session (tree formats
link records by `uid`/`parent`), inside the context the runtime would send
(after the last compaction boundary), by occurrence within each assistant
turn, first-in-first-out for ids repeated in one turn. Ids are never deduped
across the whole file: a later turn may reuse an id (Kimi, Mistral, local models).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from transcripts.core.model import Fault, FaultKind, Record, Role, ToolCall, ToolResult, Transcript
from transcripts.core.validate import (
    duplicate_text,
    missing_text,
    request_positions,
    unexpected_text,
)


def live_path(transcript: Transcript) -> list[int]:
    """Return the record indexes of the live branch, root first.

    For tree formats the branch runs from the last record written (the leaf,
    outside sidechains) back to its root through `parent` links; a record
    logged twice under one `uid` counts once. Other formats: every record in
    file order.
    """
    records = transcript.records
    if not transcript.tree:
        return [r.index for r in records]
    by_uid: dict[str, Record] = {}
    for record in records:
        if record.uid is not None and record.uid not in by_uid:
            by_uid[record.uid] = record
    leaf = next(
        (
            r
            for r in reversed(records)
            if r.uid is not None and not r.sidechain and r.obj is not None
        ),
        None,
    )
    if leaf is None:
        return [r.index for r in records]
    path: list[int] = []
    seen: set[str] = set()
    current: Record | None = by_uid[leaf.uid] if leaf.uid else None
    while current is not None and current.uid not in seen:
        assert current.uid is not None
        seen.add(current.uid)
        path.append(current.index)
        current = by_uid.get(current.parent) if current.parent is not None else None
    path.reverse()
    return path


def live_context(transcript: Transcript, path: list[int] | None = None) -> list[int]:
    """Return the record indexes the runtime sends to the model, in conversation order.

    Starts at the last compaction boundary of the live path (Claude Code
    `compact_boundary`); after a pi/OpenClaw `compaction` entry, keeps the path
    from its `firstKeptEntryId` up to the entry, then what follows it.
    """
    records = transcript.records
    if path is None:
        path = live_path(transcript)
    start = 0
    for k, index in enumerate(path):
        if records[index].boundary:
            start = k
    context = path[start:]
    for k in range(len(context) - 1, -1, -1):
        keep_from = records[context[k]].keep_from
        if keep_from is None:
            continue
        kept = next(
            (j for j in range(k) if records[context[j]].uid == keep_from),
            k,
        )
        return context[kept:k] + context[k + 1 :]
    return context


def results_follow_content(record: Record) -> bool:
    """Return True when some other content block comes before the record's first result."""
    taken = {r.block for r in record.results} | {c.block for c in record.calls}
    first = min(r.block for r in record.results)
    return any(j not in taken for j in range(first))


@dataclass(slots=True)
class Turn:
    """One assistant message (its records re-joined) with the results run right after it."""

    records: list[int]
    calls: list[ToolCall]
    run: list[int] = field(default_factory=list)
    aborted: bool = False

    @property
    def head(self) -> int:
        """Return the record index of the assistant message's first record."""
        return self.records[0]


def turns(transcript: Transcript, context: list[int]) -> list[Turn]:
    """Split `context` into assistant turns: message records, calls, and the result run.

    The result run is the records after the message, before any other
    message, that carry tool results; it ends after a record that also holds
    other content.
    """
    records = transcript.records
    messages = [i for i in context if records[i].role is not Role.META]
    found: list[Turn] = []
    k = 0
    while k < len(messages):
        record = records[messages[k]]
        if record.role is not Role.ASSISTANT:
            k += 1
            continue
        turn = Turn([record.index], list(record.calls), aborted=record.aborted)
        k += 1
        while (
            k < len(messages)
            and record.message_id is not None
            and records[messages[k]].role is Role.ASSISTANT
            and records[messages[k]].message_id == record.message_id
        ):
            turn.records.append(messages[k])
            turn.calls.extend(records[messages[k]].calls)
            k += 1
        while k < len(messages) and records[messages[k]].role in (Role.USER, Role.TOOL):
            follower = records[messages[k]]
            if not follower.results or results_follow_content(follower):
                break
            turn.run.append(follower.index)
            k += 1
            if follower.other_blocks:
                break
        found.append(turn)
    return found


@dataclass(slots=True)
class Pairing:
    """Who answers whom: the outcome of pairing one context."""

    context: list[int]
    turns: list[Turn]
    answer: dict[ToolCall, ToolResult] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    turn_of: dict[ToolCall, Turn] = field(default_factory=dict)


def pair(transcript: Transcript) -> Pairing:
    """Pair the calls and results of the live context and classify what does not pair.

    In place: a result in its turn's run answers the oldest unanswered call of
    that turn with its id. Out of place (after an interleaved message, in a later
    turn, before its call): a result whose id exactly one unanswered call in the
    context carries is `displaced_result`; one whose call is already answered is
    `duplicate_result`; any other is `orphaned_result`. Calls left unanswered
    are `missing_result`.
    """
    records = transcript.records
    context = live_context(transcript)
    found = turns(transcript, context)
    positions = request_positions(transcript, context)
    provider = transcript.provider
    loose = not transcript.adjacent
    result = Pairing(context, found)
    in_place: set[ToolResult] = set()
    for turn in found:
        if turn.aborted:
            # pi-ai drops errored and aborted assistant frames before the provider
            # sees them; a result made up for their calls would be an orphan there.
            result.faults.extend(
                Fault(
                    FaultKind.ABORTED_FRAME,
                    call.id,
                    call.record,
                    call.block,
                    turn.head,
                    "",
                    "the assistant turn was aborted or errored; the runtime drops it "
                    "before the provider sees it, so this call is never sent",
                )
                for call in turn.calls
            )
            turn.calls = []
            continue
        pending: dict[str, deque[ToolCall]] = {}
        for call in turn.calls:
            pending.setdefault(call.id, deque()).append(call)
            result.turn_of[call] = turn
        for index in turn.run:
            for res in records[index].results:
                queue = pending.get(res.tool_call_id)
                if queue:
                    result.answer[queue.popleft()] = res
                    in_place.add(res)
    open_calls: dict[str, list[ToolCall]] = {}
    for turn in found:
        for call in turn.calls:
            if call not in result.answer:
                open_calls.setdefault(call.id, []).append(call)
    ever_called = {call.id for turn in found for call in turn.calls}
    order = {index: k for k, index in enumerate(context)}
    answered_at = {res.tool_call_id: res.record for res in result.answer.values()}
    for index in context:
        record = records[index]
        if record.role is Role.META:
            continue
        for res in record.results:
            if res in in_place:
                continue
            message, first = positions.get(index, (0, 0))
            candidates = open_calls.get(res.tool_call_id, [])
            if len(candidates) == 1:
                call = candidates.pop()
                result.answer[call] = res
                if loose and order[call.record] < order[index]:
                    continue  # Responses accepts a result anywhere after its call
                turn = result.turn_of[call]
                call_message, _ = positions.get(turn.head, (0, 0))
                result.faults.append(
                    Fault(
                        FaultKind.DISPLACED_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        turn.head,
                        missing_text(provider, call_message, [call.id]),
                        f"answers the call at record {call.record}, but not right after it",
                    )
                )
            elif res.tool_call_id in ever_called and not candidates:
                first_answer = answered_at.get(res.tool_call_id)
                same_message = (
                    first_answer is not None and positions.get(first_answer, (-1,))[0] == message
                )
                texts = duplicate_text if same_message else unexpected_text
                result.faults.append(
                    Fault(
                        FaultKind.DUPLICATE_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        None,
                        texts(provider, message, first + res.block, res.tool_call_id),
                        "a second result for a call that already has one",
                    )
                )
            else:
                why = (
                    "several unanswered calls share this id; ownership is ambiguous"
                    if candidates
                    else "no call on the live branch has this id"
                )
                result.faults.append(
                    Fault(
                        FaultKind.ORPHANED_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        None,
                        unexpected_text(provider, message, first + res.block, res.tool_call_id),
                        why,
                    )
                )
    for turn in found:
        unanswered = [call for call in turn.calls if call not in result.answer]
        if not unanswered:
            continue
        message, _ = positions.get(turn.head, (0, 0))
        text = missing_text(provider, message, [call.id for call in unanswered])
        for call in unanswered:
            result.faults.append(
                Fault(
                    FaultKind.MISSING_RESULT,
                    call.id,
                    call.record,
                    call.block,
                    turn.head,
                    text,
                    f"the {call.name or 'unnamed'} call has no result",
                )
            )
    return result


def detect(transcript: Transcript, pairing: Pairing | None = None) -> list[Fault]:
    """Return every fault of `transcript`, sorted by record then block.

    Malformed records are reported wherever they are; pairing faults only
    inside the live context (see `pair`, whose result may be passed in).
    """
    if pairing is None:
        pairing = pair(transcript)
    faults = [
        Fault(
            FaultKind.MALFORMED_RECORD,
            None,
            record.index,
            None,
            None,
            record.error or "",
            record.error or "",
        )
        for record in transcript.records
        if record.error is not None
    ]
    faults.extend(pairing.faults)
    faults.sort(key=lambda f: (f.record, -1 if f.block is None else f.block, str(f.kind)))
    return faults
