"""Turn faults and a policy into a Plan of ops.

A pure function of the transcript and the policy: no clock, no randomness, no
I/O. Repairing a repaired transcript gives an empty plan (DESIGN.md contract 4).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

from transcripts.core.branch import resumed_leaf
from transcripts.core.detect import Pairing, Turn, detect, other_blocks, pair, pair_resumed
from transcripts.core.layout import block_count, dropped
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
from transcripts.core.store import RecordStore


def _anchor(transcript: Transcript, pairing: Pairing, turn: Turn, call: ToolCall) -> int:
    """Return the record after which a result for `call` goes, keeping call order.

    That is the in-place result record of the nearest earlier call of the turn,
    else the assistant message's last record. A record whose results are
    followed by other content is passed over: a result placed after it would
    land behind that content (Anthropic wants the results first). So is one
    parented on a line before the message's last one (a result written before
    its call, or on its own call's line, that the branch re-attaches): a
    record hung off it would lead back past the message's later lines, and
    the leaf's walk would leave them out or never reach it.
    """
    run_order = {index: k for k, index in enumerate(turn.run)}
    records = transcript.records
    earlier = [
        pairing.answer[c].record
        for c in turn.calls[: turn.calls.index(call)]
        if c in pairing.answer
        and pairing.answer[c] in pairing.in_place
        and not records[pairing.answer[c].record].other_blocks
        and _follows(transcript, pairing.answer[c].record, turn)
    ]
    return max(earlier, key=run_order.__getitem__) if earlier else turn.records[-1]


def _follows(transcript: Transcript, index: int, turn: Turn) -> bool:
    """Return True when record `index` hangs off `turn`'s last record or a result after it.

    Its parent is that last record, or a record of the turn's run (the
    results after the message). A record without a parent link (a format
    that is no tree) follows where it is written. This is Claude Code's
    rule: in a pi file (`last_copy`), anchoring past such a result wrote a
    parent loop where a `model_change` sat between a call and its results.
    """
    if not transcript.tree or transcript.last_copy:
        return True
    parent = transcript.records[index].parent
    if parent is None:
        return False
    records = transcript.records
    return any(records[i].uid == parent for i in (turn.records[-1], *turn.run) if i != index)


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
    # The answers of the turn's calls, looked up: not a scan of every answer per call.
    answers = ((k, pairing.answer.get(c)) for k, c in enumerate(turn.calls))
    here = [
        (k, res.block)
        for k, res in answers
        if res is not None and res.record == target and res in pairing.in_place
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
    text = policy.text_for(transcript.native_text, transcript.agent)
    calls = {(call.record, call.block): call for call in pairing.turn_of}
    new_ids = _new_ids(transcript, faults, policy, calls)
    renamed: set[ToolCall] = set()
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
        call = calls.get(where)
        if call is not None and call in new_ids and call not in renamed:
            renamed.add(call)
            ops.extend(_renames(pairing, fault, policy, call, new_ids[call]))
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
                insert = _placed(transcript, pairing, call, insert)
                if call in new_ids:
                    insert = replace(insert, call=replace(call, id=new_ids[call]))
                ops.append(insert)
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
        elif (
            kind is FaultKind.DUPLICATE_CALL_ID
            and action in (Action.KEEP_FIRST, Action.RENAME)
            and where not in calls
        ):
            # A repeat of a call's very block (id and arguments) is a streaming copy,
            # not an exchange: the first is kept. Distinct calls are renamed above.
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
        elif kind in (FaultKind.MALFORMED_RECORD, FaultKind.ORPHANED_REASONING) and (
            action is Action.DROP
        ):
            ops.append(Op(OpKind.DROP_RECORD, fault, row, fault.record))
        elif kind is FaultKind.CONTENT_AFTER_CALL and action in (Action.MOVE, Action.DROP):
            ops.extend(_split(transcript, pairing, fault, row, action))
        elif kind is FaultKind.PARENT_LOOP and action is Action.MOVE:
            # The looping record moves to the top of its branch: written with a null parent.
            ops.append(Op(OpKind.RELINK, fault, row, fault.record))
    # OpenMAIC drops interrupted frames only when a repair happens at all (§1A A4.2).
    if ops:
        ops.extend(frames)
    ops.extend(_orphaned_leaders(transcript, pairing, ops))
    ops.extend(_relogged(transcript, ops))
    return Plan(policy=policy.name, ops=tuple(ops))


def settle(transcript: Transcript, pairing: Pairing, policy: Policy) -> tuple[list[Fault], Plan]:
    """Return the faults of `transcript` and the plan that mends them under `policy`, in one pass.

    `detect` then `repair`; but where the plan drops the end of the branch the
    session resumes from and the session would resume from another branch
    (`branch.resumed_leaf`: in pi, a stray result written last whose parent
    is no entry of the file), that branch is paired too (`detect.pair_resumed`,
    into `pairing`) and the plan made again, until the session resumes from a
    branch already paired. Its faults join the list and its leaf
    `Plan.resumed`, so the repaired file needs no second repair. `pairing`
    is `detect.pair(transcript, ...)` made with `policy.replays_aborted`.
    """
    faults = detect(transcript, pairing)
    plan = repair(transcript, faults, policy, pairing)
    flags: bytearray | None = None

    def paired(index: int) -> bool:
        nonlocal flags
        if flags is None:
            flags = pairing.paired(transcript)
        return bool(flags[index])

    while plan and transcript.tree:
        gone = dropped(transcript, plan)
        leaf = resumed_leaf(transcript, gone.__contains__, paired) if gone else None
        # A leaf paired already that no scope holds (a compaction entry: its context is
        # what it keeps and what follows it) would come back for ever.
        if leaf is None or leaf in pairing.resumed:
            break
        pair_resumed(transcript, pairing, leaf)
        flags = None
        faults = detect(transcript, pairing)
        plan = repair(transcript, faults, policy, pairing)
    if not pairing.resumed:
        return faults, plan
    return faults, replace(plan, resumed=tuple(pairing.resumed))


def _relogged(transcript: Transcript, ops: list[Op]) -> list[Op]:
    """Return drops for the other copies of each record the plan changes (a line logged twice).

    Branches hold the copy standing for a uid (`branch.uid_lookup`): the first
    for Claude Code, the last for pi (`Transcript.last_copy`), so that is the
    one the ops edit. Claude Code keeps one entry per `uuid` and takes its
    content from the last line holding it (`loadTranscriptFile`, 2.1.328), so
    a copy left as it was would undo the edit on resume, and a copy of a
    dropped record would stand in for it: the copies go too. pi indexes
    entries by id, a later line replacing an earlier (session-manager.js
    `_buildIndex`): a first copy left where it was, after the standing copy
    moved, is still a line of the file, and one a move parents on it reads as
    a cycle (pi's `getBranch` has no guard); it goes too.
    """
    if not transcript.tree:
        return []
    records = transcript.records
    cause: dict[int, Op] = {}
    for op in ops:
        for index in (op.record, op.target):
            if index is not None and records[index].uid is not None:
                cause.setdefault(index, op)
    if not cause:
        return []
    uids = {records[index].uid for index in cause}
    if isinstance(records, RecordStore):
        holders = records.holding_uids(u for u in uids if u is not None)
    else:
        holders = {r.index: r.uid for r in records if r.uid is not None and r.uid in uids}
    # The copy standing for each uid: the last one written when `last_copy`, else the first.
    first = {uid: index for index, uid in sorted(holders.items(), reverse=not transcript.last_copy)}
    dropped = {op.record for op in ops if op.kind is OpKind.DROP_RECORD}
    drops: list[Op] = []
    for index, uid in sorted(holders.items()):
        edited = cause.get(first[uid])
        if index == first[uid] or index in dropped or edited is None:
            continue
        drops.append(Op(OpKind.DROP_RECORD, edited.fault, edited.policy_row, index))
    return drops


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


_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_ID_LIMIT = 64  # Anthropic's (and pi's) longest tool call id


def _new_ids(
    transcript: Transcript,
    faults: list[Fault],
    policy: Policy,
    calls: dict[tuple[int, int], ToolCall],
) -> dict[ToolCall, str]:
    """Return the new tool call id of each call the plan renames.

    A call is renamed when it shares its id with another call where the
    provider needs them apart (`duplicate_call_id` -> rename), or its id
    breaks Anthropic's pattern `^[a-zA-Z0-9_-]+$` (`malformed_call` -> drop or
    rename; the call itself is sound, so it is never dropped). The new id is
    the old one with every refused character made `_`, cut to 64 characters
    (a digest of the whole keeps it distinct), and given the first free
    suffix `-2`, `-3`... when another id of the file already has it: a pure
    function of the file. Never `_2`: Claude Code 2.1 reads a `tool_use` id
    that is another call's id plus `_<digits>` as that call's and writes
    "[Tool result missing due to internal error]" for its real result
    (observed in the agent tier).
    """
    wanted: dict[tuple[int, int], ToolCall] = {}  # by (record, block): a list's `in` was O(n²)
    for fault in faults:
        call = calls.get((fault.record, fault.block if fault.block is not None else 0))
        if call is None or (call.record, call.block) in wanted:
            continue
        action = policy.action(fault.kind)
        if (fault.kind is FaultKind.DUPLICATE_CALL_ID and action is Action.RENAME) or (
            fault.kind is FaultKind.MALFORMED_CALL
            and not call.problem
            and action in (Action.DROP, Action.RENAME)
        ):
            wanted[call.record, call.block] = call
    if not wanted:
        return {}
    strict = transcript.provider in ("anthropic", "bedrock")
    records = transcript.records
    if isinstance(records, RecordStore):  # read in column space, not a view a record
        taken = {call_id for _, call_id in records.call_rows()}
        taken.update(records.result_ids())
    else:
        taken = {c.id for r in records for c in r.calls}
        taken.update(res.tool_call_id for r in records for res in r.results)
    new_ids: dict[ToolCall, str] = {}
    for _, call in sorted(wanted.items()):
        base = call.id
        if strict and not _ANTHROPIC_ID.fullmatch(base):
            base = re.sub(r"[^a-zA-Z0-9_-]", "_", base)
        if len(base) > _ID_LIMIT - 4:
            whole = hashlib.sha256(call.id.encode("utf-8", "surrogatepass")).hexdigest()
            base = f"{base[: _ID_LIMIT - 21]}-{whole[:16]}"
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate)
        new_ids[call] = candidate
    return new_ids


def _renames(
    pairing: Pairing, fault: Fault, policy: Policy, call: ToolCall, new_id: str
) -> list[Op]:
    """Return the ops giving `call` and the result that answers it the id `new_id`."""
    row = f"{policy.name}: {fault.kind} -> rename"
    ops = [Op(OpKind.RENAME_ID, fault, row, call.record, call.block, call=call, text=new_id)]
    answer = pairing.answer.get(call)
    if answer is not None:
        ops.append(
            Op(OpKind.RENAME_ID, fault, row, answer.record, answer.block, call=call, text=new_id)
        )
    return ops


def _split(
    transcript: Transcript, pairing: Pairing, fault: Fault, row: str, action: Action
) -> list[Op]:
    """Return the ops that take an assistant message's content after its calls out of it.

    `move` (the default): the content after the first call becomes an assistant
    message of its own right after the turn's results, and the content of the
    user message holding those results that follows them becomes a user message
    after that, so roles still alternate and every `tool_use` ends its message
    (Anthropic; the Vercel AI SDK's providers). `drop`: the content is left out.
    Formats that write results on the calls themselves keep it (there is no
    message to split).
    """
    turn = next((t for t in pairing.turns if t.head == fault.turn), None)
    if turn is None or transcript.results_on_calls:
        return []
    records = transcript.records
    last_call = max(
        (c for index in turn.records for c in records[index].calls),
        key=lambda c: (c.record, c.block),
    )
    carried: list[tuple[int, tuple[int, ...]]] = []
    seen_call = False
    for index in turn.records:
        record = records[index]
        first_call = min((c.block for c in record.calls), default=None)
        late = tuple(
            j
            for j in other_blocks(record)
            if seen_call or (first_call is not None and j > first_call)
        )
        if late:
            carried.append((index, late))
        seen_call = seen_call or first_call is not None
    if not carried:
        return []
    if action is Action.DROP:
        return [
            Op(OpKind.DROP_CONTENT, fault, row, index, blocks[0], blocks=blocks)
            for index, blocks in carried
        ]
    reply = turn.run[-1] if turn.run else None
    if reply is None and transcript.inline_results and turn.follower is not None:
        # A synthetic result opens the next user message (formats.md §1): split that one.
        follower = records[turn.follower]
        if follower.role is Role.USER and not follower.calls:
            reply = turn.follower
    anchor = reply if reply is not None else turn.records[-1]
    ops = [
        Op(OpKind.SPLIT_AFTER_CALL, fault, row, index, blocks[0], anchor, last_call, blocks=blocks)
        for index, blocks in carried
    ]
    if reply is not None and records[reply].role is Role.USER:
        after = max((r.block for r in records[reply].results), default=-1)
        rest = tuple(
            j for j in other_blocks(records[reply]) if j > after or reply in turn.not_first
        )
        if rest:
            ops.append(
                Op(OpKind.SPLIT_REPLY, fault, row, reply, rest[0], anchor, last_call, blocks=rest)
            )
    return ops
