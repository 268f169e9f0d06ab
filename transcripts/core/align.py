"""Raw/repaired row alignment for the side-by-side timeline."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from enum import StrEnum

from transcripts.core.layout import SPLITS, Slot, iter_layout
from transcripts.core.model import Fault, Op, Plan, Record, Transcript


class RowStatus(StrEnum):
    """How a row of the side-by-side view changed between raw and repaired."""

    SAME = "same"
    RELINKED = "relinked"  # the record stays as it was but for its parent id, re-pointed
    CHANGED = "changed"  # the record stays, a block of it was removed
    INSERTED = "inserted"  # only on the repaired side
    DROPPED = "dropped"  # only on the raw side
    MOVED_FROM = "moved_from"  # raw position of a moved result; the repaired side is empty
    MOVED_TO = "moved_to"  # repaired position of a moved result; `moved_from` names the origin


@dataclass(frozen=True, slots=True)
class Cell:
    """One side of a row: a record summarised for display.

    `index` is the raw record index, None for an inserted record. `calls` holds
    (tool call id, name) pairs; `results` the answered tool call ids.
    """

    index: int | None
    role: str
    kind: str
    summary: str
    calls: tuple[tuple[str, str], ...] = ()
    results: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """One aligned row: raw on the left, repaired on the right."""

    status: RowStatus
    left: Cell | None
    right: Cell | None
    faults: tuple[Fault, ...] = ()
    ops: tuple[Op, ...] = ()
    moved_from: int | None = None


def _cell(
    record: Record, skip_blocks: frozenset[int] = frozenset(), inserted: tuple[Op, ...] = ()
) -> Cell:
    # In written order: a joining result goes just before its block `at`.
    placed: list[tuple[float, str]] = [
        (op.at - 0.5, op.call.id) for op in inserted if op.call is not None
    ]
    own: list[tuple[float, str]] = [
        (r.block, r.tool_call_id) for r in record.results if r.block not in skip_blocks
    ]
    return Cell(
        index=record.index,
        role=str(record.role),
        kind=record.kind,
        summary=record.text,
        calls=tuple((c.id, c.name) for c in record.calls if c.block not in skip_blocks),
        results=tuple(cid for _, cid in sorted(placed + own, key=lambda item: item[0])),
    )


def _inserted_cell(transcript: Transcript, slot: Slot) -> Cell:
    op = slot.op
    assert op is not None and op.call is not None
    if op.kind in SPLITS:
        assert op.record is not None
        record = transcript.records[op.record]
        return Cell(
            index=None,
            role=str(record.role),
            kind=f"split from record {op.record}",
            summary=record.text,
        )
    return Cell(
        index=None,
        role=str(transcript.result_role),
        kind="synthetic result",
        summary=op.text,
        results=tuple(o.call.id for o in slot.ops if o.call is not None),
    )


def align(
    transcript: Transcript, faults: list[Fault], plan: Plan, relinked: Collection[int] = ()
) -> list[Row]:
    """Return the side-by-side rows for `transcript` repaired by `plan`, in repaired order.

    Every raw record appears once on the left; every repaired record once on the
    right. Faults are attached to the row of the raw record they point at.
    `relinked` are the raw indexes of records written with another parent id
    (`formats.relinked`): their rows are RELINKED, not SAME.
    """
    return list(iter_align(transcript, faults, plan, relinked))


def iter_align(
    transcript: Transcript, faults: list[Fault], plan: Plan, relinked: Collection[int] = ()
) -> Iterator[Row]:
    """Yield the rows `align` returns, one at a time: a long session's are never all held."""
    by_record: dict[int, list[Fault]] = {}
    for fault in faults:
        by_record.setdefault(fault.record, []).append(fault)
    records = transcript.records
    for slot in iter_layout(transcript, plan):
        if slot.op is not None and slot.record is None:
            yield Row(RowStatus.INSERTED, None, _inserted_cell(transcript, slot), ops=(slot.op,))
            continue
        assert slot.record is not None
        record = records[slot.record]
        here = tuple(by_record.get(record.index, ()))
        if slot.moved_away:
            yield Row(RowStatus.MOVED_FROM, _cell(record), None, here, slot.ops)
        elif slot.dropped:
            yield Row(RowStatus.DROPPED, _cell(record), None, here, slot.ops)
        elif slot.moved_in:
            yield Row(
                RowStatus.MOVED_TO,
                None,
                _cell(record, slot.removed_blocks),
                (),
                slot.ops,
                moved_from=record.index,
            )
        elif slot.block_order is not None:
            yield Row(
                RowStatus.CHANGED,
                _cell(record),
                _cell(record, slot.removed_blocks, slot.inserted),
                here,
                slot.ops + slot.inserted,
            )
        else:
            status = RowStatus.RELINKED if record.index in relinked else RowStatus.SAME
            yield Row(status, _cell(record), _cell(record), here, slot.ops)
