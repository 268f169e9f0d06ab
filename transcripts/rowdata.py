"""The payload of a stored timeline row: typed objects with readable names, compact keys on disk.

A `TimelineRow.data` holds one JSON object per aligned row. Long sessions have
tens of thousands of rows, so the stored keys stay one or two letters; this
module is the only place that knows them. `RowData.to_json` writes the
object, `RowData.from_json` reads it back once, and everything above
(`transcripts.timeline`, the views, the templates) reads names: `fault.kind`,
`op.policy_row`, `row.would_be`.

The stored keys (unchanged since timelines were first stored, so rows built
by an earlier build read the same):

    l, r    raw and repaired cell: {i: index, role, kind, s: summary,
            c: [[tool call id, name], ...], r: [answered tool call id, ...]}
    f       faults: [{k: kind, id: tool call id, d: detail, e: provider error}]
    o       ops: [{k: op kind, p: policy row, id: tool call id}]
    m       the raw record the row's content was moved from
    only    True when the row shows only the result blocks carried out of `m`
    ins     results a changed row gains: [{id, t: text, from: record moved from}]
    nc      the compaction record the raw record lies before (not sent)
    w       faults the raw record would have if it were sent (as `f`, no `e`)
    mp      [message, block]: where the record goes in the request the agent builds
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transcripts.core.align import Cell
from transcripts.core.model import Fault, Op


@dataclass(frozen=True, slots=True)
class RowFault:
    """A fault of a row: its kind id, the tool call id ("" if none), detail and provider error."""

    kind: str
    tool_call_id: str
    detail: str
    error: str = ""

    @classmethod
    def of(cls, fault: Fault) -> RowFault:
        """Return the row's summary of the engine's `fault`."""
        return cls(str(fault.kind), fault.tool_call_id or "", fault.detail, fault.error)


@dataclass(frozen=True, slots=True)
class RowOp:
    """An op of a row: its kind id, the policy row that chose it, the tool call id ("" if none)."""

    kind: str
    policy_row: str
    tool_call_id: str

    @classmethod
    def of(cls, op: Op) -> RowOp:
        """Return the row's summary of the engine's `op`."""
        return cls(str(op.kind), op.policy_row, op.tool_call_id or "")


@dataclass(frozen=True, slots=True)
class InsertedResult:
    """A result block a changed record gains: synthesized (`text`) or moved from `moved_from`."""

    tool_call_id: str
    text: str
    moved_from: int | None = None


@dataclass(slots=True)
class RowData:
    """What a stored timeline row says beyond its columns (see the module docstring)."""

    left: Cell | None
    right: Cell | None
    faults: list[RowFault] = field(default_factory=list)
    ops: list[RowOp] = field(default_factory=list)
    moved_from: int | None = None
    only_moved: bool = False
    inserted: list[InsertedResult] = field(default_factory=list)
    not_sent: int | None = None
    would_be: list[RowFault] = field(default_factory=list)
    request_position: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the row as the JSON object stored, with its compact keys."""
        data: dict[str, Any] = {
            "l": _cell_json(self.left),
            "r": _cell_json(self.right),
            "f": [
                {"k": f.kind, "id": f.tool_call_id, "d": f.detail, "e": f.error}
                for f in self.faults
            ],
            "o": [{"k": o.kind, "p": o.policy_row, "id": o.tool_call_id} for o in self.ops],
        }
        if self.not_sent is not None:
            data["nc"] = self.not_sent
            data["w"] = [{"k": f.kind, "id": f.tool_call_id, "d": f.detail} for f in self.would_be]
        if self.request_position is not None:
            data["mp"] = list(self.request_position)
        if self.moved_from is not None:
            data["m"] = self.moved_from
        if self.only_moved:
            data["only"] = True
        if self.inserted:
            data["ins"] = [
                {"id": i.tool_call_id, "t": i.text, "from": i.moved_from} for i in self.inserted
            ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RowData:
        """Return the row stored as `data` (a decoded `TimelineRow.data`).

        Raises KeyError or TypeError for an object this module did not write.
        """
        position = data.get("mp")
        return cls(
            left=_cell(data["l"]),
            right=_cell(data["r"]),
            faults=[_fault(f) for f in data["f"]],
            ops=[RowOp(o["k"], o["p"], o["id"]) for o in data["o"]],
            moved_from=data.get("m"),
            only_moved=bool(data.get("only")),
            inserted=[InsertedResult(i["id"], i["t"], i["from"]) for i in data.get("ins", ())],
            not_sent=data.get("nc"),
            would_be=[_fault(f) for f in data.get("w", ())],
            request_position=(position[0], position[1]) if position is not None else None,
        )


def _cell_json(cell: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "i": cell.index,
        "role": cell.role,
        "kind": cell.kind,
        "s": cell.summary,
        "c": [list(call) for call in cell.calls],
        "r": list(cell.results),
    }


def _cell(data: dict[str, Any] | None) -> Cell | None:
    if data is None:
        return None
    return Cell(
        index=data["i"],
        role=data["role"],
        kind=data["kind"],
        summary=data["s"],
        calls=tuple((call_id, name) for call_id, name in data["c"]),
        results=tuple(data["r"]),
    )


def _fault(data: dict[str, str]) -> RowFault:
    return RowFault(data["k"], data["id"], data["d"], data.get("e", ""))
