"""Where every record ends up once a plan is applied, in repaired file order.

Both the exporters (`transcripts.formats`) and the side-by-side alignment read
this one layout, so what the timeline shows is exactly what the file holds.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from transcripts.core.branch import (
    branch_paths,
    kept_leaf,
    kept_sidechain_leaves,
    leaf_index,
    path_from,
    reattached,
    subagent_file,
)
from transcripts.core.model import Op, OpKind, Plan, Record, Role, Transcript


@dataclass(frozen=True, slots=True)
class Slot:
    """One position of the repaired file (or of the raw file, for what left it).

    `record` is a raw record index; None for a new record, which `op` describes:
    an `insert_result` (a synthetic result; several, listed in `ops`, where one
    message holds many results) or a `move_result` whose block is carried out
    of a record that keeps other blocks. A record moved whole shows
    twice: `moved_away` at its raw position (not written) and `moved_in` where it
    lands. `dropped` records are not written; `removed_blocks` are block indexes
    left out of a record that stays; `block_order`, when set, is the order of the
    blocks the record is written with (None: as it was); `inserted` are the ops
    whose results join the record, each before its block `at`. A split
    (`split_after_call`, `split_reply`) is a new record holding blocks
    `op.blocks` of record `op.record`, which stays without them.
    """

    record: int | None
    op: Op | None = None
    ops: tuple[Op, ...] = ()
    dropped: bool = False
    moved_away: bool = False
    moved_in: bool = False
    removed_blocks: frozenset[int] = frozenset()
    block_order: tuple[int, ...] | None = None
    inserted: tuple[Op, ...] = ()

    @property
    def written(self) -> bool:
        """Return True when the slot holds bytes of the repaired file."""
        return not (self.dropped or self.moved_away)


def block_count(record: Record) -> int:
    """Return how many content blocks `record` holds (calls, results and others)."""
    return len(record.calls) + len(record.results) + record.other_blocks


SPLITS = frozenset({OpKind.SPLIT_AFTER_CALL, OpKind.SPLIT_REPLY})
# The ops whose result a new record holds: a synthetic one, or one carried out of its record.
_RESULTS = frozenset({OpKind.INSERT_RESULT, OpKind.MOVE_RESULT})


def _placement_key(op: Op) -> tuple[int, int, int]:
    if op.kind in SPLITS:
        # Split-off content follows every result placed after the same record.
        assert op.record is not None
        return (sys.maxsize, op.kind is OpKind.SPLIT_REPLY, op.record)
    call = op.call
    return (call.record, call.block, 0) if call is not None else (-1, -1, 0)


@dataclass(slots=True)
class _Edits:
    removed: dict[int, set[int]]
    whole_moves: dict[int, Op]
    placed: dict[int, list[Op]]
    touching: dict[int, list[Op]]
    results_first: set[int]
    inline: dict[int, list[Op]]
    group_inserts: bool = False
    renamed: set[int] = field(default_factory=set)
    # Records written without their blocks rather than dropped (leaves that keep a branch).
    kept: frozenset[int] = frozenset()


def _collect(transcript: Transcript, ops: Iterable[Op]) -> _Edits:
    records = transcript.records
    edits = _Edits({}, {}, {}, {}, set(), {}, transcript.inline_results)
    ops = tuple(ops)
    # A message another op puts a result into stays where that op wants it: a result
    # moved out of it, its only block, is carried into a new record, not moved with it.
    targets = {op.target for op in ops if op.target is not None}
    # Where one message holds many results, a result moved after a record another result
    # is placed after is carried, to share one new message with it (`_placed_slots`).
    placed_at = Counter(
        op.anchor
        for op in ops
        if edits.group_inserts
        and op.kind in _RESULTS
        and op.target is None
        and op.anchor is not None
    )
    shared = {anchor for anchor, n in placed_at.items() if n > 1}
    for op in ops:
        if op.record is not None:
            edits.touching.setdefault(op.record, []).append(op)
        if op.kind is OpKind.RENAME_ID:
            assert op.record is not None
            edits.renamed.add(op.record)
        elif op.kind is OpKind.RELINK:
            continue  # the record stays as it is but for its parent link (`renderer._relink`)
        elif op.kind in SPLITS or op.kind is OpKind.DROP_CONTENT:
            assert op.record is not None
            edits.removed.setdefault(op.record, set()).update(op.blocks)
            if op.kind in SPLITS:
                assert op.anchor is not None
                edits.placed.setdefault(op.anchor, []).append(op)
        elif op.target is not None:
            edits.inline.setdefault(op.target, []).append(op)
            if op.kind is OpKind.MOVE_RESULT:
                assert op.record is not None and op.block is not None
                edits.removed.setdefault(op.record, set()).add(op.block)
        elif op.kind is OpKind.DROP_RECORD:
            assert op.record is not None
            edits.removed.setdefault(op.record, set()).update(
                range(max(1, block_count(records[op.record])))
            )
        elif op.kind is OpKind.RESULTS_FIRST:
            assert op.record is not None
            edits.results_first.add(op.record)
        elif op.kind in (OpKind.DROP_RESULT, OpKind.DROP_CALL):
            assert op.record is not None and op.block is not None
            edits.removed.setdefault(op.record, set()).add(op.block)
        elif op.kind is OpKind.MOVE_RESULT:
            assert op.record is not None and op.block is not None and op.anchor is not None
            if block_count(records[op.record]) == 1 and (
                op.record not in targets and op.anchor not in shared
            ):
                edits.whole_moves[op.record] = op
            else:
                edits.removed.setdefault(op.record, set()).add(op.block)
            edits.placed.setdefault(op.anchor, []).append(op)
        else:
            assert op.anchor is not None
            edits.placed.setdefault(op.anchor, []).append(op)
    for ops_here in edits.placed.values():
        ops_here.sort(key=_placement_key)
    for ops_here in edits.inline.values():
        ops_here.sort(key=lambda op: (op.at, _placement_key(op)))
    edits.kept = _kept(transcript, edits)
    return edits


def _emptied(records: list[Record], edits: _Edits, index: int) -> bool:
    """Return True when the ops remove every block of record `index` and put nothing in it."""
    removed = edits.removed.get(index)
    return (
        removed is not None
        and len(removed) >= max(1, block_count(records[index]))
        and index not in edits.inline
        and index not in edits.whole_moves
    )


def _kept(transcript: Transcript, edits: _Edits) -> frozenset[int]:
    """Return the leaves to write without blocks where dropping them would move a branch.

    In an agent's file whose results travel in user messages (Claude
    Code's), a line whose `content` is an empty list is still a message
    line: Claude Code 2.1.328 loads it and keeps the branch it ends (it
    sends nothing for a user line, "(no content)" for an assistant one).
    Dropped instead, it would hand the session to another branch, which
    nothing has checked (`branch.kept_leaf`), or leave a file Claude Code
    cannot open ("No conversation found with session ID"). A sidechain's
    last line is kept so too when dropping it would hand that sidechain to
    another branch (`branch.kept_sidechain_leaves`).
    """
    if not transcript.agent or transcript.result_role is not Role.USER or not edits.removed:
        return frozenset()
    records = transcript.records

    def gone(i: int) -> bool:
        return _emptied(records, edits, i)

    index = kept_leaf(transcript, gone)
    leaves = [*kept_sidechain_leaves(transcript, gone), *([] if index is None else [index])]
    return frozenset(i for i in leaves if records[i].role in (Role.USER, Role.ASSISTANT))


def dropped(transcript: Transcript, plan: Plan) -> frozenset[int]:
    """Return the raw indexes of the records `plan` leaves out of the repaired file.

    Those whose every block the ops remove with nothing put in them, but the
    leaves written without blocks to keep a branch (`_kept`); a record moved
    whole is written elsewhere, so it is not one.
    """
    edits = _collect(transcript, plan.ops)
    records = transcript.records
    return frozenset(
        index
        for index in edits.removed
        if _emptied(records, edits, index) and index not in edits.kept
    )


def _placed_slots(edits: _Edits, anchor: int) -> list[Slot]:
    slots: list[Slot] = []
    for op in edits.placed.get(anchor, ()):
        if op.kind is OpKind.MOVE_RESULT and op.record in edits.whole_moves:
            slots.append(Slot(op.record, ops=(op,), moved_in=True))
        elif (
            edits.group_inserts
            and op.kind in _RESULTS
            and slots
            and slots[-1].record is None
            and slots[-1].ops[-1].kind in _RESULTS
        ):
            # Where one message holds several results, the synthetic and carried results
            # after one anchor share one new message (Gemini wants them in one content,
            # Bedrock in the one user message after the calls).
            last = slots.pop()
            slots.append(Slot(None, op=last.op, ops=(*last.ops, op)))
        else:
            slots.append(Slot(None, op=op, ops=(op,)))
    return slots


def _order(record: Record, edits: _Edits, removed: frozenset[int]) -> tuple[int, ...] | None:
    """Return the order a record's kept blocks are written in, None when unchanged."""
    if not removed and record.index not in edits.results_first and record.index not in edits.inline:
        return None
    kept = [j for j in range(block_count(record)) if j not in removed]
    if record.index in edits.results_first:
        results = {r.block for r in record.results}
        kept = [j for j in kept if j in results] + [j for j in kept if j not in results]
    return tuple(kept)


def _slots_at(record: Record, edits: _Edits) -> list[Slot]:
    """Return the slots at a record's raw place: its own, then what is placed after it."""
    i = record.index
    ops = tuple(edits.touching.get(i, ()))
    removed = frozenset(edits.removed.get(i, ()))
    if i in edits.whole_moves:
        own = Slot(i, ops=ops, moved_away=True)
    elif (
        removed
        and len(removed) >= max(1, block_count(record))
        and i not in edits.inline
        and i not in edits.kept
    ):
        # Dropped once every block is gone, unless a result is inserted into it.
        own = Slot(i, ops=ops, dropped=True)
    else:
        own = Slot(
            i,
            ops=ops,
            removed_blocks=removed,
            block_order=_order(record, edits, removed),
            inserted=tuple(edits.inline.get(i, ())),
        )
    return [own, *_placed_slots(edits, i)]


def layout(transcript: Transcript, plan: Plan) -> list[Slot]:
    """Return the slots of the repaired file in order, plus raw positions left behind.

    Records no op touches keep their relative order. New and moved records go
    right after their anchor record, in the order of the calls they answer.
    """
    return list(iter_layout(transcript, plan))


def iter_layout(transcript: Transcript, plan: Plan) -> Iterator[Slot]:
    """Yield the slots `layout` returns, one at a time: a long session's are never all held."""
    edits = _collect(transcript, plan.ops)
    # Where the live branch's last slot is written at the end, the slots of the records it
    # leaves and joins are the ones `leaf_last` gives (a few; the rest as they come).
    moved = (
        leaf_last(transcript, sparse_layout(transcript, plan), plan.resumed)
        if transcript.tree
        else {}
    )
    for record in transcript.records:
        slots = moved.get(record.index)
        yield from slots if slots is not None else _slots_at(record, edits)


def sparse_layout(transcript: Transcript, plan: Plan) -> dict[int, list[Slot]]:
    """Return `layout` for the records a plan changes only: {record index: its slots}.

    Every record missing from the map is written as it was, at its place; a
    long session with a few repairs costs a few slots, not one per record.
    """
    edits = _collect(transcript, plan.ops)
    affected = (
        edits.touching.keys()
        | edits.removed.keys()
        | edits.whole_moves.keys()
        | edits.placed.keys()
        | edits.inline.keys()
        | edits.results_first
        | edits.renamed
    )
    records = transcript.records
    return {i: _slots_at(records[i], edits) for i in sorted(affected)}


def leaf_last(
    transcript: Transcript, at: dict[int, list[Slot]], resumed: tuple[int, ...] = ()
) -> dict[int, list[Slot]]:
    """Return the sparse layout `at` written with the live branch's last slot after every other.

    A tree format's live branch runs back from the last record written
    (`branch._leaf`; pi: `buildSessionContext` starts at the file's last
    entry). A plan that moves or drops the record at the end of that branch
    (a displaced result that was the leaf, moved to its call) leaves another
    record last, and the file resumes on another branch. The branch's last
    slot, in branch order up to its leaf (`branch.leaf_index`) and the
    re-attached results that hang off it, is then moved to the end of the file:
    a record written there as it was (`moved_in`), or a new one. Parent links do not
    follow file order: the renderer re-links along the branch with `at` as
    given (`renderer._relink`), and writes the file with what this returns.
    A new dict; entries of `at` it does not change are shared. `at` itself
    unless the branch's end would not be last, or for a subagent's own file.
    With `resumed` (`Plan.resumed`), the branch kept last is the one ending
    at its last leaf: the repair drops the live branch's end.
    """
    records = transcript.records
    if not transcript.tree or not records or subagent_file(transcript):
        return at
    # The branch ends at its leaf, or at a result re-attached after it that hangs off it
    # once re-linked (`_hanging`). One that hangs off a line before the leaf (Claude
    # Code: a result parented on the message's thinking line) is not the branch's end:
    # written last, it would be the leaf, and its walk would lead back past its call.
    if resumed:
        leaf: int | None = resumed[-1]
        path = path_from(transcript, resumed[-1])
    else:
        path = branch_paths(transcript)[0]
        leaf = leaf_index(transcript)
    if leaf is not None and leaf in path:
        cut = path.index(leaf) + 1
        path = path[:cut] + _hanging(transcript, at, path, cut)
    end: tuple[int, Slot | None] | None = None  # (raw index, its slot; None: untouched)
    for index in reversed(path):
        slots = at.get(index)
        if slots is None:
            end = (index, None)
            break
        written = [slot for slot in slots if slot.written]
        if written:
            end = (index, written[-1])
            break
    if end is None:
        return at
    index, last = end
    if not _written_after(transcript, at, index, last):
        return at
    moved = dict(at)
    here = at.get(index) or [Slot(index)]
    if last is None or (last.record == index and not last.moved_in):
        own = last or here[0]
        moved[index] = [Slot(index, ops=own.ops, moved_away=True) if s is own else s for s in here]
        relocated = replace(own, moved_in=True)
    else:
        moved[index] = [slot for slot in here if slot is not last]
        relocated = last
    tail = len(records) - 1
    moved[tail] = [*(moved.get(tail) or [Slot(tail)]), relocated]
    return moved


def _hanging(
    transcript: Transcript, at: dict[int, list[Slot]], path: list[int], cut: int
) -> list[int]:
    """Return the records of `path[cut:]` that hang off the leaf `path[cut - 1]` once repaired.

    Those re-attached after the leaf whose parent, as the repaired file
    writes it, is the leaf or a record that hangs off it: its parent as
    read (pi: a result written before its call, parented on the call's
    entry), or the slot written just before it, when the renderer re-links
    it there (`renderer._relink_path`: a record whose predecessor on the
    path is not the record written just before it, because a synthetic
    result or a moved one is written between them or the record is moved;
    in a pi file, one re-attached after its call, `renderer._reattached`).
    A record re-linked so is on the branch the leaf's walk reads, and so are
    the synthetic results placed after it: the last of them ends the branch.
    Listed when the last slot written at the record's place is on the branch.
    """
    records = transcript.records
    follows = {records[path[cut - 1]].uid}
    previous = _last_written(at, path[cut - 1])
    chained = True  # the slot written just before is on the branch
    hanging: list[int] = []
    # pi's re-attached records are re-linked to the slot before them (`renderer._reattached`).
    attached = set(reattached(transcript, path[cut - 1 :])) if transcript.last_copy else set()
    for k in range(cut, len(path)):
        index, before = path[k], path[k - 1]
        slots = at.get(index)
        placed: Sequence[Slot | None] = slots or (None,)
        for slot in placed:
            if slot is not None and not slot.written:
                continue
            if slot is not None and slot.record is None:
                previous = None  # a new record, linked to the slot before it
                continue
            own = records[index] if slot is None or slot.record is None else records[slot.record]
            moved = slot is not None and slot.moved_in
            if not moved and (own.boundary or (before == previous and own.index not in attached)):
                # Written with its own link; one re-linked to the slot before it is on
                # the branch when that slot is.
                chained = own.parent in follows
            if chained:
                follows.add(own.uid)
            previous = own.index
        if chained and any(slot is None or slot.written for slot in placed):
            hanging.append(index)
    return hanging


def _last_written(at: dict[int, list[Slot]], index: int) -> int | None:
    """Return the raw index of the record written last at `index`'s place (None: a new one)."""
    slots = at.get(index)
    if slots is None:
        return index
    written = [slot for slot in slots if slot.written]
    return written[-1].record if written else None


def _written_after(
    transcript: Transcript, at: dict[int, list[Slot]], index: int, last: Slot | None
) -> bool:
    """Return True when a slot that could be a leaf is written after `last` (at record `index`).

    A leaf is a readable record with a uid outside sidechains (`branch._leaf`),
    or a new record but one written into a sidechain (a synthetic result of a
    sidechain's call, a part of a sidechain's line: the format copies the
    line's `isSidechain`). Only the slots after record `index` are looked at.
    """
    records = transcript.records
    slots = at.get(index) or []
    at_last = next((k for k, slot in enumerate(slots) if slot is last), len(slots))
    after = slots[at_last + 1 :]
    for k in range(index + 1, len(records)):
        after.extend(at.get(k) or [Slot(k)])
    for slot in after:
        if not slot.written:
            continue
        if slot.record is None:
            op = slot.op
            source = None if op is None else op.call.record if op.call else op.record
            if source is None or not records[source].sidechain:
                return True
            continue
        record = records[slot.record]
        if record.uid is not None and not record.sidechain and record.error is None:
            return True
    return False
