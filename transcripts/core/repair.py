"""Turn faults and a policy into a Plan of ops.

A pure function of the transcript and the policy: no clock, no randomness, no
I/O. Repairing a repaired transcript gives an empty plan (DESIGN.md contract 4).
"""

from __future__ import annotations

from dataclasses import replace

from transcripts.core.detect import Pairing, Turn, other_blocks, pair
from transcripts.core.layout import block_count
from transcripts.core.model import (
    Action,
    Fault,
    FaultKind,
    Op,
    OpKind,
    Plan,
    Role,
    ToolCall,
    Transcript,
)
from transcripts.core.policy import Policy


def _anchor(transcript: Transcript, pairing: Pairing, turn: Turn, call: ToolCall) -> int:
    """Return the record after which a result for `call` goes, keeping call order.

    That is the in-place result record of the nearest earlier call of the turn,
    else the assistant message's last record. A record whose results are
    followed by other content is passed over: a result placed after it would
    land behind that content (Anthropic wants the results first).
    """
    run_order = {index: k for k, index in enumerate(turn.run)}
    earlier = [
        pairing.answer[c].record
        for c in turn.calls[: turn.calls.index(call)]
        if c in pairing.answer
        and pairing.answer[c] in pairing.in_place
        and not transcript.records[pairing.answer[c].record].other_blocks
    ]
    return max(earlier, key=run_order.__getitem__) if earlier else turn.records[-1]


def _inline_target(transcript: Transcript, turn: Turn) -> int | None:
    """Return the user message a turn's results belong in, for formats where one holds many.

    That is the first record of the turn's result run, else the message right
    after the turn when it is a user message (formats.md §1: a synthetic
    result opens the next user message). None: the result needs a record.
    """
    if not transcript.inline_results:
        return None
    records = transcript.records
    target = turn.run[0] if turn.run else turn.follower
    if target is None or records[target].role is not Role.USER or records[target].calls:
        return None
    return target


def _at(transcript: Transcript, pairing: Pairing, turn: Turn, call: ToolCall, target: int) -> int:
    """Return the block of `target` before which `call`'s result goes.

    Before the result of a later call, keeping call order; else after the
    record's results but before any other content (results come first).
    """
    order = {c: k for k, c in enumerate(turn.calls)}
    here = [
        (order[c], res.block)
        for c, res in pairing.answer.items()
        if res.record == target and res in pairing.in_place and c in order
    ]
    later = [block for k, block in here if k > order[call]]
    if later:
        return min(later)
    last = max((block for _, block in here), default=-1)
    others = other_blocks(transcript.records[target])
    # Results of a record in `not_first` are moved before its other content.
    candidates = others if target in turn.not_first else [j for j in others if j > last]
    return min(candidates) if candidates else last + 1


def _placed(
    transcript: Transcript,
    pairing: Pairing,
    call: ToolCall,
    op: Op,
) -> Op:
    """Return `op` (an insert or a move answering `call`) with where its result goes."""
    turn = pairing.turn_of[call]
    if transcript.results_on_calls:
        return replace(op, target=call.record, at=call.block)
    target = _inline_target(transcript, turn)
    if target is not None and target != op.record:
        return replace(op, target=target, at=_at(transcript, pairing, turn, call, target))
    return replace(op, anchor=_anchor(transcript, pairing, turn, call))


def repair(
    transcript: Transcript, faults: list[Fault], policy: Policy, pairing: Pairing | None = None
) -> Plan:
    """Return the ops that mend `faults` under `policy`, in fault order.

    `pairing` is `detect.pair(transcript)` when the caller already has it (it
    must have been made with `replays_aborted=policy.replays_aborted`).
    Actions a kind does not support (and `keep`/`flag`) yield no op. A call
    that is dropped takes its results with it, and gets no synthetic one.
    """
    if pairing is None:
        pairing = pair(transcript, replays_aborted=policy.replays_aborted)
    text = policy.synthetic_text if policy.synthetic_text is not None else transcript.native_text
    calls = {(call.record, call.block): call for call in pairing.turn_of}
    owner = {(res.record, res.block): call for call, res in pairing.answer.items()}
    # Only a call broken in itself is dropped; an id that merely breaks one provider's
    # pattern is reported, since dropping it would throw away a real exchange.
    dropped_calls = {
        (f.record, f.block)
        for f in faults
        if f.kind is FaultKind.MALFORMED_CALL
        and policy.action(f.kind) is Action.DROP
        and (call := calls.get((f.record, f.block if f.block is not None else 0))) is not None
        and call.problem
    }
    ops: list[Op] = []
    frames: list[Op] = []
    for fault in faults:
        action = policy.action(fault.kind)
        row = policy.row(fault.kind)
        where = (fault.record, fault.block if fault.block is not None else 0)
        kind = fault.kind
        if kind is FaultKind.ABORTED_FRAME and fault.tool_call_id is None:
            if policy.drops_interrupted_frames:
                frames.append(Op(OpKind.DROP_RECORD, fault, row, fault.record))
        elif kind is FaultKind.ABORTED_FRAME and action is Action.DROP:
            ops.append(Op(OpKind.DROP_CALL, fault, row, fault.record, fault.block))
        elif kind in (FaultKind.MISSING_RESULT, FaultKind.PENDING_RESULT):
            call = calls.get(where)
            if call is None or where in dropped_calls:
                continue
            if action is Action.SYNTHESIZE:
                insert = Op(OpKind.INSERT_RESULT, fault, row, call=call, text=text)
                ops.append(_placed(transcript, pairing, call, insert))
            elif action is Action.DROP:
                ops.append(Op(OpKind.DROP_CALL, fault, row, call.record, call.block, call=call))
        elif kind is FaultKind.MALFORMED_CALL and where in dropped_calls:
            call = calls.get(where)
            ops.append(Op(OpKind.DROP_CALL, fault, row, fault.record, fault.block, call=call))
            answer = pairing.answer.get(call) if call is not None else None
            if answer is not None:
                ops.append(Op(OpKind.DROP_RESULT, fault, row, answer.record, answer.block))
        elif kind is FaultKind.DISPLACED_RESULT and action is Action.MOVE:
            call = owner[where]
            if (call.record, call.block) in dropped_calls:
                continue
            turn = pairing.turn_of[call]
            if policy.recovers_late_results or fault.record in turn.span:
                move = Op(OpKind.MOVE_RESULT, fault, row, fault.record, fault.block, call=call)
                ops.append(_placed(transcript, pairing, call, move))
            else:
                late = f"{policy.name}: {kind} beyond the next assistant -> synthesize, drop late"
                ops.append(Op(OpKind.DROP_RESULT, fault, late, fault.record, fault.block))
                insert = Op(OpKind.INSERT_RESULT, fault, late, call=call, text=text)
                ops.append(_placed(transcript, pairing, call, insert))
        elif kind is FaultKind.RESULT_NOT_FIRST and action is Action.MOVE:
            ops.append(Op(OpKind.RESULTS_FIRST, fault, row, fault.record, fault.block))
        elif kind is FaultKind.DUPLICATE_CALL_ID and action is Action.KEEP_FIRST:
            turn = next(t for t in pairing.turns if t.head == fault.turn)
            ops.extend(
                Op(OpKind.DROP_CALL, fault, row, copy.record, copy.block, call=copy)
                for copy in turn.copies
                if copy.id == fault.tool_call_id
            )
        elif (kind is FaultKind.DUPLICATE_RESULT and action is Action.KEEP_FIRST) or (
            kind is FaultKind.ORPHANED_RESULT and action is Action.DROP
        ):
            ops.append(Op(OpKind.DROP_RESULT, fault, row, fault.record, fault.block))
    # OpenMAIC drops interrupted frames only when a repair happens at all (§1A A4.2).
    if ops:
        ops.extend(frames)
    ops.extend(_orphaned_leaders(transcript, pairing, ops))
    return Plan(policy=policy.name, ops=tuple(ops))


def _orphaned_leaders(transcript: Transcript, pairing: Pairing, ops: list[Op]) -> list[Op]:
    """Return drops for records whose every led item the plan drops (Responses reasoning).

    The Responses API refuses a `reasoning` item without the item it produced
    (formats.md §3, invariant 4), so dropping a call drops its reasoning too.
    """
    records = transcript.records
    gone = _dropped_whole(transcript, ops)
    if not gone:
        return []
    drops: list[Op] = []
    context = pairing.context
    for k, index in enumerate(context):
        if not records[index].leads:
            continue
        led = []
        for following in context[k + 1 :]:
            record = records[following]
            if record.role is Role.META:
                continue
            if record.role is not Role.ASSISTANT or record.leads:
                break
            led.append(following)
        cause = next((op for op in ops if op.record in led), None)
        if led and cause is not None and all(i in gone for i in led):
            drops.append(Op(OpKind.DROP_RECORD, cause.fault, cause.policy_row, index))
    return drops


def _dropped_whole(transcript: Transcript, ops: list[Op]) -> set[int]:
    """Return the records the ops remove entirely (every block dropped)."""
    removed: dict[int, set[int]] = {}
    for op in ops:
        if op.kind in (OpKind.DROP_CALL, OpKind.DROP_RESULT) and op.record is not None:
            removed.setdefault(op.record, set()).add(op.block or 0)
    return {
        index
        for index, blocks in removed.items()
        if len(blocks) >= max(1, block_count(transcript.records[index]))
    }
