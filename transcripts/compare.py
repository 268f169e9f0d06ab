"""Two revisions of a session side by side: a record-level diff, unchanged runs collapsed.

Each revision is parsed in its own format and its records are compared by
their exact bytes (difflib's longest-matching-blocks, no junk heuristic), the
way a code review compares lines. A run of unchanged records longer than
twice CONTEXT shows its first and last CONTEXT records and collapses the rest
into one line that says how many it hides.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import orjson

from transcripts import formats
from transcripts.core.model import Record, Transcript
from transcripts.formats import FormatError
from transcripts.formats.display import read_record, timestamp
from transcripts.models import Revision, Session
from transcripts.timeline import ShownCell

CONTEXT = 3
# Rows shown (collapsed runs count one); past this the page says how many are left out.
MAX_ROWS = 2000
# Changed stretches up to this many records are matched exactly; longer ones with
# difflib's junk heuristic (quadratic time is not offered to any viewer).
EXACT_MATCH_RECORDS = 2000
MAX_FIELDS = 6


@dataclass
class CompareRow:
    """One row of the comparison: `status` is same, changed, inserted or dropped."""

    status: str
    left: ShownCell | None
    right: ShownCell | None
    # A changed row's top-level fields whose values differ ("parentUuid" for a relinked
    # record, which looks the same on both sides), at most MAX_FIELDS of them.
    fields: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """Return the row's element id, named after its left (else right) record."""
        if self.left is not None:
            return f"a-{self.left.index}"
        assert self.right is not None
        return f"b-{self.right.index}"


@dataclass
class Collapsed:
    """A run of `count` unchanged records, from left record `left` and right record `right`."""

    count: int
    left: int
    right: int
    status: str = "collapsed"


@dataclass
class Comparison:
    """What comparing revision `a` with revision `b` found: rows, counts, or why not."""

    a: Revision
    b: Revision
    rows: list[CompareRow | Collapsed] = field(default_factory=list)
    unchanged: int = 0
    changed: int = 0
    inserted: int = 0
    dropped: int = 0
    cut: int = 0
    error: str = ""


def _load(session: Session, revision: Revision) -> tuple[Transcript, bytes]:
    data = revision.read()
    own = session.format if session.format != "unknown" and not session.error else None
    return formats.load(data, session.name, own), data


def _cell(record: Record, data: bytes) -> ShownCell:
    raw = data[record.start : record.end]
    cell = ShownCell(record.index, str(record.role), record.kind, record.text)
    cell.time = timestamp(raw)
    cell.blocks = list(enumerate(read_record(raw)))
    return cell


def changed_fields(before: bytes, after: bytes) -> list[str]:
    """Return the top-level keys whose values differ between two JSON objects' bytes.

    In the order the keys come (`before`'s, then those only `after` has), at
    most MAX_FIELDS. Empty when either is not a JSON object.
    """
    try:
        a, b = orjson.loads(before), orjson.loads(after)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    keys = [*a, *(k for k in b if k not in a)]
    return [k for k in keys if a.get(k, _MISSING) != b.get(k, _MISSING)][:MAX_FIELDS]


_MISSING = object()


def _identity(record: Record) -> object:
    if record.uid is not None:
        return record.uid
    return (
        str(record.role),
        tuple(c.id for c in record.calls),
        tuple(r.tool_call_id for r in record.results),
        record.text[:200],
    )


def _opcodes(a: list[Any], b: list[Any]) -> list[tuple[str, int, int, int, int]]:
    """Return difflib's opcodes turning `a` into `b`, in time that stays near linear.

    A repair changes few records, so the common head and tail are matched
    first, as equal runs. Only the middle goes to SequenceMatcher, exactly
    when it is short, and otherwise with its junk heuristic on, so that a
    session of repeated records (a viewer can ask for any) costs no
    quadratic time.
    """
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    found: list[tuple[str, int, int, int, int]] = []
    if head:
        found.append(("equal", 0, head, 0, head))
    if middle_a or middle_b:
        exact = max(len(middle_a), len(middle_b)) <= EXACT_MATCH_RECORDS
        matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=not exact)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            found.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        found.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return found


def compare(session: Session, a: Revision, b: Revision, *, full: bool = False) -> Comparison:
    """Return revision `a` (left) compared with revision `b` (right), record by record.

    `full` shows every unchanged record instead of collapsing long runs. At
    most MAX_ROWS rows are shown (`cut` counts the rest). A revision that
    cannot be parsed gives a Comparison with `error` set (file, line, reason).
    """
    result = Comparison(a, b)
    try:
        left, left_data = _load(session, a)
        right, right_data = _load(session, b)
    except FormatError as exc:
        result.error = str(exc)
        return result
    keys_a = [left_data[r.start : r.end] for r in left.records]
    keys_b = [right_data[r.start : r.end] for r in right.records]
    rows: list[CompareRow | Collapsed] = []

    def add(status: str, i: int | None, j: int | None) -> None:
        # Cells are read only for rows that will be shown.
        if len(rows) >= MAX_ROWS:
            result.cut += 1
            return
        l_cell = _cell(left.records[i], left_data) if i is not None else None
        r_cell = _cell(right.records[j], right_data) if j is not None else None
        row = CompareRow(status, l_cell, r_cell)
        if status == "changed" and i is not None and j is not None:
            before, after = left.records[i], right.records[j]
            row.fields = changed_fields(
                left_data[before.start : before.end], right_data[after.start : after.end]
            )
        rows.append(row)

    for tag, i1, i2, j1, j2 in _opcodes(keys_a, keys_b):
        if tag == "equal":
            result.unchanged += i2 - i1
            head, tail = i2 - i1, 0
            if not full and i2 - i1 > 2 * CONTEXT:
                head = 0 if i1 == 0 else CONTEXT
                tail = 0 if i2 == len(keys_a) else CONTEXT
            for k in range(head):
                add("same", i1 + k, j1 + k)
            if head + tail < i2 - i1 and len(rows) < MAX_ROWS:
                rows.append(Collapsed(i2 - i1 - head - tail, i1 + head, j1 + head))
            for k in range(tail):
                add("same", i2 - tail + k, j2 - tail + k)
            continue
        # Within a replaced run, a record changed in place keeps its identity (its
        # uid, or its role, calls, results and text): pair those, the rest are
        # dropped or inserted.
        inner = _opcodes(
            [_identity(r) for r in left.records[i1:i2]],
            [_identity(r) for r in right.records[j1:j2]],
        )
        for tag2, k1, k2, l1, l2 in inner:
            if tag2 == "equal":
                for k in range(k2 - k1):
                    result.changed += 1
                    add("changed", i1 + k1 + k, j1 + l1 + k)
                continue
            for k in range(k1, k2):
                result.dropped += 1
                add("dropped", i1 + k, None)
            for k in range(l1, l2):
                result.inserted += 1
                add("inserted", None, j1 + k)
    result.rows = rows
    return result
