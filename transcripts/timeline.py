"""The session page's timeline: built once per revision and view, then read a window at a time.

Building a timeline parses the revision (streamed from storage when it is a
local file), detects, plans and aligns it, and stores one `TimelineRow` per
aligned row: the status, the raw record index and its byte span, the fault
and op summaries, flags for the filters and the text the search looks in. A
timeline is keyed by (revision, policy, read-as format, live, engine
version): revisions are immutable, so a built timeline never goes stale; a
session that stops being live is simply another key.

Showing a window reads that window's rows (an indexed range of positions),
then the byte spans of their records from the blob, and parses only those
records to show their content blocks (`transcripts.formats.display`). So the
first screen of a 50,000-record session costs what a 500-record one does, and
no request parses a whole large file: small revisions are built during the
request, larger ones by a Celery task while the page polls, showing
meanwhile a first look at the file's first records (`preview`).
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any

import orjson
from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Q, QuerySet

from transcripts.core.align import Cell, Row, RowStatus
from transcripts.core.branch import live_context
from transcripts.core.compaction import Compacted, before_compaction
from transcripts.core.model import FaultKind, OpKind, Record
from transcripts.core.validate import request_positions
from transcripts.engine import (
    PRESETS,
    Analysis,
    FileSource,
    analyze,
    count_faults,
)
from transcripts.fields import storable, storable_text
from transcripts.formats import FORMATS
from transcripts.formats.display import Shown, ShownKind, read_record, timestamp
from transcripts.models import Revision, Timeline, TimelineRow, blob_name
from transcripts.policies import policy_for
from transcripts.rowdata import InsertedResult, RowData, RowFault, RowOp
from transcripts.search import MAX_WORDS, pasted_ids
from transcripts.verdict import Verdict, verdicts

WINDOW_ROWS = 100
# Rows shown above a row jumped to, so that it is seen in its context.
CONTEXT_ROWS = 5
FAULTS_LISTED = 200
# A record longer than this is shown by its preview in a window; expanding it reads it whole.
MAX_WINDOW_RECORD = 1 << 20
MAX_RECORD = 64 << 20
# What a build does, in order; Timeline.stage is the number (1-based) of the one under way.
BUILD_STAGES = (
    "reading the file and finding its faults",
    "lining up the raw and repaired rows",
    "checking the repaired file as the provider would",
    "storing the rows",
)


# Building.


class RowSpool:
    """A built timeline's rows, written to a temporary file as they are made and read back.

    One orjson line per row, a JSON array of its `COLUMNS` values (ints, bools,
    None, and strings already storable: `storable_text`, `_json_text`), so a
    row read back equals the row written. The file lives under
    FILE_UPLOAD_TEMP_DIR and is gone once closed (or the process ends). Use as
    a context manager.
    """

    def __init__(self) -> None:
        folder = Path(settings.FILE_UPLOAD_TEMP_DIR)
        folder.mkdir(parents=True, exist_ok=True)
        # Closed by `close`, which the build and the store call whatever happens.
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=folder, prefix="timeline-")  # noqa: SIM115
        self.count = 0

    def add(self, row: tuple[Any, ...]) -> None:
        """Write `row` after the rows added before it."""
        self.file.write(orjson.dumps(row))
        self.file.write(b"\n")
        self.count += 1

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """Yield the rows added, in order, one line read at a time."""
        self.file.flush()
        self.file.seek(0)
        for line in self.file:
            yield tuple(orjson.loads(line))

    def close(self) -> None:
        """Delete the file."""
        self.file.close()

    def __enter__(self) -> RowSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Built:
    """A timeline's rows and summary, computed from its revision and key, not yet stored.

    `rows` holds the TimelineRow column tuples (`COLUMNS` order, after the
    timeline id) in a temporary file, read back a row at a time; `compaction`
    the summary of `compacted` (`_compaction_summary`); `before` and `after`
    the provider's verdicts on the raw and the repaired file; `others`
    {policy: verdict dict} for the other presets. Close it (or use it as a
    context manager) once stored: that deletes the rows' file.
    """

    analysis: Analysis
    compacted: Compacted | None
    rows: RowSpool
    compaction: dict[str, Any]
    before: Verdict | None
    after: Verdict | None
    others: dict[str, Any]

    def fields(self) -> dict[str, Any]:
        """Return the Timeline fields a built timeline stores (but its status and times)."""
        analysis = self.analysis
        return {
            "format": analysis.format,
            "format_label": analysis.format_label,
            "provider": analysis.provider,
            "record_count": analysis.record_count,
            "row_count": self.rows.count,
            "fault_counts": analysis.fault_counts,
            "op_count": len(analysis.plan.ops),
            "compaction": self.compaction,
            "verdict": {
                **{
                    name: verdict.as_dict()
                    for name, verdict in (("raw", self.before), ("repaired", self.after))
                    if verdict is not None
                },
                "policies": self.others,
            },
            "error": analysis.error or "",
        }

    def search_entries(self) -> Iterator[tuple[int, str]]:
        """Yield (raw record index, text) of the raw records, for the search across sessions."""
        return search_entries(self.rows)

    def close(self) -> None:
        """Delete the rows' file."""
        self.rows.close()

    def __enter__(self) -> Built:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def search_entries(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[int, str]]:
    """Yield (raw record index, text) of the raw rows of `rows` (`COLUMNS` tuples)."""
    return (
        (row[2], MESSAGE_TOKEN.sub("", row[9])) for row in rows if row[3] and row[2] is not None
    )


def build(timeline: Timeline, stage: Callable[[int], None]) -> Built:
    """Compute the rows of `timeline` from its revision's bytes, streamed from storage.

    `stage(n)` is called as each of BUILD_STAGES begins (1-based) and with
    the last once the file is closed. The rows go to a temporary file as they
    are made (`RowSpool`): a build holds one row at a time, not all of them.
    Raises whatever the engine or storage raises (the rows' file deleted).
    """
    spool = RowSpool()
    try:
        with timeline.revision.source() as data:
            stage(1)
            analysis = _analyze(timeline, data)
            stage(2)
            compacted = (
                before_compaction(analysis.transcript) if analysis.transcript is not None else None
            )
            listed = _listed_records(compacted)
            position: dict[int, int] = {}  # listed raw record -> its row
            if analysis.error is None:
                for row in _rows(analysis, compacted):
                    spool.add(row)
                    if row[3] and row[2] in listed:
                        position[row[2]] = row[0]
            compaction = _compaction_summary(compacted, position)
            stage(3)
            before, after = verdicts(analysis)
            others = _other_verdicts(timeline, data) if after is not None else {}
        stage(4)
    except BaseException:
        spool.close()
        raise
    return Built(analysis, compacted, spool, compaction, before, after, others)


# The TimelineRow columns a built row holds, in order, after the timeline id.
COLUMNS = ("position", "status", "record", "raw", "start", "end", "faulty", "tool", "data", "text")


class RevisionBytes:
    """A revision's bytes read by range from storage, without reading the rest.

    A revision is one blob, or (appended by a sync) a blob followed by the
    deltas of its chain; a range may span several. Use as a context manager.
    """

    def __init__(self, revision: Revision) -> None:
        segments: list[tuple[int, int, str]] = []  # (start, end, blob sha256)
        while revision.appended_to_id is not None:
            base = Revision.objects.only("sha256", "size", "delta", "appended_to").get(
                pk=revision.appended_to_id
            )
            segments.append((base.size, revision.size, revision.delta))
            revision = base
        segments.append((0, revision.size, revision.sha256))
        self.segments = segments[::-1]
        self.files: dict[str, IO[bytes]] = {}

    def read(self, start: int, end: int) -> bytes:
        """Return the bytes from offset `start` to `end`."""
        parts: list[bytes] = []
        for seg_start, seg_end, sha256 in self.segments:
            if seg_end <= start or seg_start >= end:
                continue
            blob = self.files.get(sha256)
            if blob is None:
                blob = self.files[sha256] = default_storage.open(blob_name(sha256), "rb")
            blob.seek(max(start, seg_start) - seg_start)
            parts.append(blob.read(min(end, seg_end) - max(start, seg_start)))
        return b"".join(parts)

    def __enter__(self) -> RevisionBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        for blob in self.files.values():
            blob.close()


def _analyze(timeline: Timeline, data: bytes | FileSource, policy: str | None = None) -> Analysis:
    """Return the analysis a timeline shows: under its policy (or `policy`), live as it is."""
    session = timeline.revision.session
    own = session.format if session.format != "unknown" and not session.error else None
    chosen = policy_for(policy or timeline.policy, session.workspace_id)
    if timeline.live and session.last_write is not None:
        # Analysed as at the last write: pending exactly when the key says live.
        moment = session.last_write.timestamp()
        grace = max(float(settings.LIVE_GRACE), 1.0)
        return analyze(
            data,
            session.name,
            chosen,
            format=timeline.read_as or own,
            now=moment,
            last_write=moment,
            grace=grace,
        )
    return analyze(data, session.name, chosen, format=timeline.read_as or own)


def _rows(analysis: Analysis, compacted: Compacted | None = None) -> Iterator[tuple[Any, ...]]:
    """Yield the rows of `analysis`'s side-by-side view in order, as values of `COLUMNS`.

    With `compacted`, a row whose raw record the runtime no longer sends
    carries the compaction's record index (`not_sent`) and the faults that
    record would have if it were sent (`would_be`).
    """
    assert analysis.transcript is not None
    records = analysis.transcript.records
    hidden: set[int] = set(compacted.hidden) if compacted is not None else set()
    would_be: dict[int, list[RowFault]] = {}
    for fault in compacted.faults if compacted is not None else ():
        # What a row shows of a fault that would be: no provider error, nothing was sent.
        would_be.setdefault(fault.record, []).append(
            RowFault(str(fault.kind), fault.tool_call_id or "", fault.detail)
        )
    # Where each record of the live context goes in the request the agent builds: what
    # a provider's error names ("messages.128.content.4"), so a pasted error finds it.
    requested = request_positions(analysis.transcript, live_context(analysis.transcript))
    for position, row in enumerate(analysis.iter_rows()):
        data = RowData(
            left=row.left,
            # An unchanged cell (a re-linked record's too) is the left one: not stored twice.
            right=row.right if row.status not in (RowStatus.SAME, RowStatus.RELINKED) else None,
            faults=[RowFault.of(f) for f in row.faults],
            ops=[RowOp.of(op) for op in row.ops],
        )
        index = row.left.index if row.left is not None else None
        if compacted is not None and index in hidden:
            data.not_sent = compacted.boundary
            data.would_be = would_be.get(index, [])
        if index is not None and row.left is not None and index in requested:
            data.request_position = requested[index]
        yield _row(position, row, records, data)


def _listed_records(compacted: Compacted | None) -> set[int]:
    """Return the raw records of the faults the compaction summary lists."""
    if compacted is None:
        return set()
    return {f.record for f in compacted.faults[:FAULTS_LISTED]}


def _compaction_summary(compacted: Compacted | None, position: dict[int, int]) -> dict[str, Any]:
    """Return what the timeline keeps of `compacted`: boundary, counts, the first faults listed.

    `position` maps the raw record of each fault listed (`_listed_records`) to
    its row's position.
    """
    if compacted is None:
        return {}
    faults = [
        {
            "kind": str(f.kind),
            "tool_call_id": f.tool_call_id or "",
            "detail": f.detail,
            "record": f.record,
            "position": position.get(f.record, 0),
        }
        for f in compacted.faults[:FAULTS_LISTED]
    ]
    counts = count_faults(Counter(str(f.kind) for f in compacted.faults))
    return {
        "record": compacted.boundary,
        "hidden": len(compacted.hidden),
        "fault_total": len(compacted.faults),
        "fault_counts": counts,
        "faults": faults,
    }


def _row(position: int, row: Row, records: list[Record], data: RowData) -> tuple[Any, ...]:
    """Return the values of `COLUMNS` for `row`, its payload `data` completed and encoded."""
    status = row.status
    index = row.left.index if row.left is not None else None
    raw = index is not None
    if row.moved_from is not None:
        data.moved_from = index = row.moved_from
    carried = next((op for op in row.ops if op.kind is OpKind.MOVE_RESULT), None)
    if status == RowStatus.INSERTED and carried is not None and carried.record is not None:
        # A result block carried out of a record that keeps its other blocks: show
        # it as the move it is, read from the record it came from.
        status = RowStatus.MOVED_TO
        data.moved_from = index = carried.record
        data.only_moved = True
    inserted = [
        InsertedResult(op.call.id, op.text, op.record if op.kind is OpKind.MOVE_RESULT else None)
        for op in row.ops
        if op.call is not None
        and op.target is not None
        and op.kind in (OpKind.INSERT_RESULT, OpKind.MOVE_RESULT)
    ]
    if inserted and status == RowStatus.CHANGED:
        data.inserted = inserted
    record = records[index] if index is not None else None
    cells = [c for c in (row.left, row.right) if c is not None]
    return (
        position,
        str(status),
        index,
        raw,
        record.start if record is not None else None,
        record.end if record is not None else None,
        bool(row.faults),
        any(c.calls or c.results for c in cells),
        _json_text(data.to_json()),
        storable_text(_search_text(row, record))
        + (
            f" {message_token(data.request_position[0])}"
            if data.request_position is not None
            else ""
        ),
    )


def _decode(text: str) -> RowData:
    """Return the payload of a stored row from its `data` column."""
    return RowData.from_json(orjson.loads(text))


def _json_text(data: dict[str, Any]) -> str:
    """Return `data` as JSON text; strings that cannot be UTF-8 are spelled out first."""
    try:
        return orjson.dumps(data).decode()
    except orjson.JSONEncodeError:  # a lone surrogate, e.g. from a file name
        return orjson.dumps(storable(data)).decode()


MESSAGE_TOKEN = re.compile(r" msg:\d+;$")


def message_token(message: int) -> str:
    """Return the search text that marks a row as request message `message`."""
    return f"msg:{message};"


# A provider's error names the request message (and block) it refused.
PROVIDER_ERROR = re.compile(r"messages\.(\d+)(?:\.content\.(\d+))?")


def provider_error_position(timeline: Timeline, text: str) -> tuple[int, int, str] | None:
    """Return (row position, raw record, "messages.M[.content.B]") of the record `text` names.

    `text` is a provider's error as pasted ("messages.128.content.4: unexpected
    tool_use_id ..."); the message index is the one of the request the agent
    builds from the file (`core.validate.request_positions`): the record
    holding block B of message M, or the message's first record. None when
    the text names no message or the request has no such message.
    """
    found = PROVIDER_ERROR.search(text)
    if found is None:
        return None
    message, block = int(found.group(1)), found.group(2)
    rows = (
        TimelineRow.objects.filter(timeline=timeline, raw=True)
        .filter(text__contains=message_token(message))
        .order_by("position")
        .values_list("position", "record", "data")
    )
    best: tuple[int, int] | None = None
    for position, record, data in rows:
        assert record is not None  # a raw row shows a raw record
        decoded = _decode(data)
        found_at = decoded.request_position
        first_block = found_at[1] if found_at is not None else 0
        if block is None and _names_an_id_of(text, decoded.left):
            # "messages.1: tool_use ids were found without tool_result blocks ...: toolu_x"
            # names a message of several records: the one holding that id is meant.
            return position, record, found.group(0)
        if best is None or (block is not None and first_block <= int(block)):
            best = (position, record)
    if best is None:
        return None
    return best[0], best[1], found.group(0)


def _names_an_id_of(text: str, cell: Cell | None) -> bool:
    """Return True when `text` holds a tool call id of `cell`'s calls or results."""
    if cell is None:
        return False
    ids = [call_id for call_id, _ in cell.calls] + list(cell.results)
    return any(len(call_id) >= 4 and call_id in text for call_id in ids)


def _search_text(row: Row, record: Record | None) -> str:
    parts: list[str] = []
    for cell in (row.left, row.right):
        if cell is not None:
            parts += [cell.role, cell.kind, cell.summary, *cell.results]
            parts += [f"{call_id} {name}" for call_id, name in cell.calls]
    if record is not None:
        parts += [call.args for call in record.calls]
        parts += [result.text for result in record.results]
    parts += [f"{f.kind} {f.tool_call_id or ''}" for f in row.faults]
    return " ".join(dict.fromkeys(p for p in parts if p))


# Reading windows.


@dataclass(frozen=True)
class Filters:
    """What a timeline shows: only faults (and rows a repair changes), only tool traffic, text."""

    faults: bool = False
    tools: bool = False
    q: str = ""

    def __bool__(self) -> bool:
        return self.faults or self.tools or bool(self.q)

    def apply(self, rows: QuerySet[TimelineRow]) -> QuerySet[TimelineRow]:
        """Return `rows` narrowed to those the filters let through."""
        if self.faults:
            rows = rows.filter(Q(faulty=True) | ~Q(status=RowStatus.SAME))
        if self.tools:
            rows = rows.filter(tool=True)
        if self.q:
            # Spelled as the stored text is (a pattern lookup skips the field's own).
            rows = rows.filter(self.text_match())
        return rows

    def text_match(self) -> Q:
        """Return the condition on a row's text: it holds `q`, or for a pasted provider
        error, one of the tool call ids it names (`search.pasted_ids`)."""
        ids = pasted_ids(self.q)[:MAX_WORDS]
        if not ids:
            return Q(text__icontains=storable_text(self.q))
        match = Q()
        for call_id in ids:
            match |= Q(text__icontains=call_id)
        return match


@dataclass
class ShownCell:
    """One side of a shown row: a record's role, time and content blocks.

    `blocks` pairs each block with its number among the record's blocks (None
    for a synthetic one), which is how a long block is asked for in full.
    """

    index: int | None
    role: str
    kind: str
    summary: str
    time: str = ""
    blocks: list[tuple[int | None, Shown]] = field(default_factory=list)
    too_large: bool = False


@dataclass
class ShownRow:
    """A row of the window as the template renders it."""

    position: int
    status: str
    left: ShownCell | None
    right: ShownCell | None
    faults: list[RowFault]
    ops: list[RowOp]
    moved_from: int | None = None
    # The record of the compaction the row's raw record lies before (not sent), and
    # the faults it would have if it were sent.
    not_sent: int | None = None
    would_be: list[RowFault] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """Return the row's element id: `r-<raw record>` where the raw side has one."""
        if self.left is not None and self.left.index is not None:
            return f"r-{self.left.index}"
        return f"p-{self.position}"

    @property
    def fault_kinds(self) -> list[str]:
        """Return the distinct fault kinds of the row, in order."""
        return list(dict.fromkeys(f.kind for f in self.faults))


@dataclass
class Window:
    """A run of consecutive (filtered) rows, and whether more lie before and after it."""

    rows: list[ShownRow]
    more_before: bool
    more_after: bool
    focus: str = ""

    @property
    def first(self) -> int:
        """Return the position of the first row (-1 when empty)."""
        return self.rows[0].position if self.rows else -1

    @property
    def last(self) -> int:
        """Return the position of the last row (-1 when empty)."""
        return self.rows[-1].position if self.rows else -1


def rows_of(timeline: Timeline, filters: Filters) -> QuerySet[TimelineRow]:
    """Return the timeline's rows the filters let through, in position order."""
    return filters.apply(TimelineRow.objects.filter(timeline=timeline)).order_by("position")


def window_after(
    timeline: Timeline, filters: Filters, after: int, size: int = WINDOW_ROWS
) -> Window:
    """Return the window of the `size` rows after position `after` (-1: from the start)."""
    rows = list(rows_of(timeline, filters).filter(position__gt=after)[: size + 1])
    return Window(_show(timeline, rows[:size]), more_before=after >= 0, more_after=len(rows) > size)


def window_before(
    timeline: Timeline, filters: Filters, before: int, size: int = WINDOW_ROWS
) -> Window:
    """Return the window of the `size` rows before position `before`."""
    rows = list(rows_of(timeline, filters).filter(position__lt=before).reverse()[: size + 1])
    shown = list(reversed(rows[:size]))
    return Window(_show(timeline, shown), more_before=len(rows) > size, more_after=True)


def window_at(timeline: Timeline, filters: Filters, position: int) -> Window:
    """Return a window with the row at (or the first after) `position` near its top, focused."""
    rows = rows_of(timeline, filters)
    above = list(rows.filter(position__lt=position).reverse()[: CONTEXT_ROWS + 1])
    below = list(rows.filter(position__gte=position)[: WINDOW_ROWS - CONTEXT_ROWS + 1])
    shown_rows = list(reversed(above[:CONTEXT_ROWS])) + below[: WINDOW_ROWS - CONTEXT_ROWS]
    window = Window(
        _show(timeline, shown_rows),
        more_before=len(above) > CONTEXT_ROWS,
        more_after=len(below) > WINDOW_ROWS - CONTEXT_ROWS,
    )
    target = next((row for row in window.rows if row.position >= position), None)
    window.focus = target.anchor if target is not None else ""
    return window


# A first look at a timeline still being built: read from the start of its file, at
# most this many bytes (doubling from PREVIEW_FIRST_READ until a window's records are in).
PREVIEW_BYTES = 8 << 20
PREVIEW_FIRST_READ = 256 << 10


def preview(timeline: Timeline, size: int = WINDOW_ROWS) -> Window | None:
    """Return the first `size` rows of `timeline`, read from its file's first records, unstored.

    For the session page while the timeline is queued or building: the
    records of the first PREVIEW_BYTES at most, cut after the last whole
    line, are analysed on their own under the timeline's policy and format.
    Calls whose results lie past the cut are taken as pending (not shown as
    faults); what only the rest of the file can show (a result further on,
    a later branch, a compaction) is not in these rows. `more_after` is
    False: the rows after them come with the built timeline. Returns None
    for a file that is not JSON lines or whose start cannot be read as
    such: its first records are not known until it is read whole.
    """
    revision = timeline.revision
    want = min(PREVIEW_FIRST_READ, revision.size)
    with RevisionBytes(revision) as source:
        while True:
            data = source.read(0, want)
            if data.count(b"\n") > size or want >= min(revision.size, PREVIEW_BYTES):
                break
            want = min(want * 2, revision.size, PREVIEW_BYTES)
    if len(data) < revision.size:
        data = data[: data.rfind(b"\n") + 1]
    if not data:
        return None
    analysis = _analyze_start(timeline, data)
    known = FORMATS.get(analysis.format)
    if analysis.error is not None or known is None or not known.jsonl:
        return None
    rows = [
        TimelineRow(timeline=timeline, **dict(zip(COLUMNS, values, strict=True)))
        for values in islice(_rows(analysis), size)
    ]
    shown = _show(timeline, rows)
    for row in shown:
        row.faults = [f for f in row.faults if f.kind != FaultKind.PENDING_RESULT]
    return Window(shown, more_before=False, more_after=False)


def _analyze_start(timeline: Timeline, data: bytes) -> Analysis:
    """Return the analysis of `data`, the first records of the timeline's file.

    As the build would analyse the whole file (`_analyze`), but live: a call
    unanswered by the end of `data` may be answered past it.
    """
    session = timeline.revision.session
    own = session.format if session.format != "unknown" and not session.error else None
    chosen = policy_for(timeline.policy, session.workspace_id)
    return analyze(
        data,
        session.name,
        chosen,
        format=timeline.read_as or own,
        now=0.0,
        last_write=0.0,
        grace=1.0,
    )


def position_of_record(timeline: Timeline, record: int) -> int | None:
    """Return the position of the row showing raw record `record` on its raw side."""
    # No ordering: one row matches, and an ORDER BY would lead SQLite to scan by position.
    found = (
        TimelineRow.objects.filter(timeline=timeline, record=record, raw=True)
        .order_by()
        .values_list("position", flat=True)[:1]
    )
    return found[0] if found else None


def next_fault(timeline: Timeline, filters: Filters, after: int) -> int | None:
    """Return the position of the first row with a fault after position `after`."""
    rows = rows_of(timeline, filters).filter(faulty=True, position__gt=after)
    return rows.values_list("position", flat=True).first()


def previous_fault(timeline: Timeline, filters: Filters, before: int) -> int | None:
    """Return the position of the last row with a fault before position `before`."""
    rows = rows_of(timeline, filters).filter(faulty=True, position__lt=before)
    return rows.reverse().values_list("position", flat=True).first()


@dataclass
class ListedFault:
    """A fault of the fault panel: its kind, tool call id, provider error and where it is."""

    kind: str
    tool_call_id: str
    error: str
    detail: str
    position: int
    record: int | None
    anchor: str


def listed_faults(timeline: Timeline, limit: int = FAULTS_LISTED) -> list[ListedFault]:
    """Return the timeline's first `limit` faults in row order."""
    rows = TimelineRow.objects.filter(timeline=timeline, faulty=True).order_by("position")
    faults: list[ListedFault] = []
    for position, record, raw, data in rows.values_list("position", "record", "raw", "data"):
        anchor = f"r-{record}" if raw and record is not None else f"p-{position}"
        for fault in _decode(data).faults:
            faults.append(
                ListedFault(
                    fault.kind,
                    fault.tool_call_id,
                    fault.error,
                    fault.detail,
                    position,
                    record,
                    anchor,
                )
            )
            if len(faults) >= limit:
                return faults
    return faults


def _show(timeline: Timeline, rows: list[TimelineRow]) -> list[ShownRow]:
    """Return the rows as shown: each record's bytes read (one blob, one pass) and parsed."""
    spans = {
        row.record: (row.start, row.end)
        for row in rows
        if row.record is not None and row.start is not None and row.end is not None
    }
    content: dict[int, tuple[list[Shown], str] | None] = {}
    if spans:
        with RevisionBytes(timeline.revision) as source:
            for index, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
                content[index] = _read(source, start, end, MAX_WINDOW_RECORD)
    return [
        _shown_row(row, content.get(row.record) if row.record is not None else None) for row in rows
    ]


def _read(
    source: RevisionBytes, start: int, end: int, limit: int
) -> tuple[list[Shown], str] | None:
    """Return a record's blocks and time from its span; None when it is longer than `limit`."""
    if end - start > limit:
        return None
    data = source.read(start, end)
    return read_record(data), timestamp(data)


def record_blocks(timeline: Timeline, record: int) -> tuple[list[Shown], str]:
    """Return every block of raw record `record` in full (up to MAX_RECORD bytes), and its time.

    Raises TimelineRow.DoesNotExist when the timeline has no such record.
    """
    start, end = (
        TimelineRow.objects.filter(timeline=timeline, record=record, raw=True)
        .values_list("start", "end")
        .get()
    )
    if start is None or end is None:
        raise TimelineRow.DoesNotExist
    with RevisionBytes(timeline.revision) as source:
        read = _read(source, start, min(end, start + MAX_RECORD), MAX_RECORD)
    assert read is not None
    return read


def _side(
    cell: Cell | None,
    read: tuple[list[Shown], str] | None,
    keep: Iterable[tuple[int | None, Shown]] | None = None,
) -> ShownCell | None:
    if cell is None:
        return None
    shown = ShownCell(cell.index, cell.role, cell.kind, cell.summary)
    if read is None:
        shown.too_large = cell.index is not None
        return shown
    blocks, shown.time = read
    shown.blocks = list(keep) if keep is not None else list(enumerate(blocks))
    return shown


def _without(
    blocks: list[Shown], calls: Counter[str], results: Counter[str]
) -> list[tuple[int | None, Shown]]:
    """Return the numbered blocks less the last calls and results with the ids counted."""
    kept: list[tuple[int | None, Shown]] = []
    for j in range(len(blocks) - 1, -1, -1):
        block = blocks[j]
        counted = calls if block.kind is ShownKind.CALL else results
        if block.kind in (ShownKind.CALL, ShownKind.RESULT) and counted[block.tool_call_id] > 0:
            counted[block.tool_call_id] -= 1
            continue
        kept.append((j, block))
    return kept[::-1]


def _only(
    blocks: list[Shown], calls: Counter[str], results: Counter[str]
) -> list[tuple[int | None, Shown]]:
    """Return the numbered calls and results with the ids counted, and nothing else."""
    kept: list[tuple[int | None, Shown]] = []
    for j, block in enumerate(blocks):
        counted = calls if block.kind is ShownKind.CALL else results
        if block.kind in (ShownKind.CALL, ShownKind.RESULT) and counted[block.tool_call_id] > 0:
            counted[block.tool_call_id] -= 1
            kept.append((j, block))
    return kept


def _shown_row(row: TimelineRow, read: tuple[list[Shown], str] | None) -> ShownRow:
    data = _decode(row.data)
    left, right = data.left, data.right
    status = row.status
    right_keep: list[tuple[int | None, Shown]] | None = None
    if read is not None and right is not None:
        blocks = read[0]
        if status == RowStatus.CHANGED and left is not None:
            inserted = [item.tool_call_id for item in data.inserted]
            gone_calls = Counter(c[0] for c in left.calls) - Counter(c[0] for c in right.calls)
            gone_results = Counter(left.results) - (Counter(right.results) - Counter(inserted))
            right_keep = _without(blocks, gone_calls, gone_results)
            right_keep += [
                (None, Shown(ShownKind.RESULT, _inserted_text(i), tool_call_id=i.tool_call_id))
                for i in data.inserted
            ]
        elif data.only_moved:
            right_keep = _only(blocks, Counter(c[0] for c in right.calls), Counter(right.results))
    shown_right: ShownCell | None
    if status == RowStatus.INSERTED and right is not None:
        shown_right = ShownCell(None, right.role, right.kind, right.summary)
        shown_right.blocks = [
            (None, Shown(ShownKind.RESULT, right.summary, tool_call_id=call_id))
            for call_id in right.results
        ]
    else:
        shown_right = _side(right, read, right_keep)
    return ShownRow(
        position=row.position,
        status=status,
        left=_side(left, read) if row.raw else None,
        right=shown_right,
        faults=data.faults,
        ops=data.ops,
        moved_from=data.moved_from,
        not_sent=data.not_sent,
        would_be=data.would_be,
    )


def _inserted_text(item: InsertedResult) -> str:
    if item.moved_from is not None:
        return f"(moved here from record #{item.moved_from})"
    return item.text


def _other_verdicts(timeline: Timeline, data: bytes | FileSource) -> dict[str, dict[str, Any]]:
    """Return {policy: verdict on the file repaired under it} for every other preset.

    Only for a revision small enough to build during a request: the session
    page shows these beside each policy without parsing the file again. Each
    is analysed as the timeline is (a live one's running calls pending), so
    a policy's verdict here is the one its own page gives.
    """
    if timeline.revision.size > settings.TIMELINE_INLINE_BYTES:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for name in PRESETS:
        if name != timeline.policy:
            other = _analyze(timeline, data, name)
            _, after = verdicts(other)
            if after is not None:
                found[name] = after.as_dict()
    return found


def policy_verdicts(timeline: Timeline) -> dict[str, Verdict]:
    """Return {policy: verdict on the repaired file} as far as the build worked them out."""
    stored = (timeline.verdict or {}).get("policies", {})
    found = {name: Verdict.from_dict(value) for name, value in stored.items()}
    return {name: verdict for name, verdict in found.items() if verdict is not None}


def timeline_verdicts(timeline: Timeline) -> tuple[Verdict | None, Verdict | None]:
    """Return the provider's verdicts the build stored: (revision as it is, repaired)."""
    stored = timeline.verdict or {}
    return Verdict.from_dict(stored.get("raw")), Verdict.from_dict(stored.get("repaired"))


# The overview ruler: where in the whole timeline the faults and the ops are.

# One mark per hundredth of the rows (a CSS class each: the CSP allows no inline style).
RULER_BUCKETS = 100


@dataclass(frozen=True)
class Mark:
    """A mark on the ruler: at `top` (0 to RULER_BUCKETS - 1) for the row at `position`.

    `kind` is a fault kind id (`fault` True) or an op kind id; `count` how many
    rows of that kind the mark stands for (rows close together share one).
    """

    top: int
    kind: str
    fault: bool
    position: int
    anchor: str
    record: int | None
    count: int = 1


def ruler(timeline: Timeline) -> list[Mark]:
    """Return the ruler's marks: per bucket of rows, one per fault kind and one per op kind.

    Reads the rows with a fault or a change only (the partial index serves the
    faults; the changed rows are few beside the unchanged ones).
    """
    total = max(timeline.row_count, 1)
    rows = (
        TimelineRow.objects.filter(timeline=timeline)
        .filter(Q(faulty=True) | ~Q(status=RowStatus.SAME))
        .order_by("position")
        .values_list("position", "record", "raw", "data")
    )
    marks: dict[tuple[int, str, bool], Mark] = {}
    for position, record, raw, data in rows:
        top = position * RULER_BUCKETS // total
        anchor = f"r-{record}" if raw and record is not None else f"p-{position}"
        decoded = _decode(data)
        kinds = [(f.kind, True) for f in decoded.faults] + [(o.kind, False) for o in decoded.ops]
        for kind, fault in dict.fromkeys(kinds):
            key = (top, kind, fault)
            found = marks.get(key)
            marks[key] = (
                Mark(top, kind, fault, position, anchor, record)
                if found is None
                else Mark(
                    top, kind, fault, found.position, found.anchor, found.record, found.count + 1
                )
            )
    return sorted(marks.values(), key=lambda m: (m.top, not m.fault, m.kind))


# The diff view: the rows a repair changes or a fault is on, with a little context;
# every run of unchanged rows between them folded into one line.

DIFF_CONTEXT = 3
DIFF_ROWS = 300


@dataclass(frozen=True)
class Folded:
    """A run of `count` unchanged rows from position `start`, folded into one line."""

    start: int
    count: int

    @property
    def label(self) -> str:
        """Return the line shown for the run: "… 16,320 unchanged records …"."""
        return f"… {self.count:,} unchanged record{'s' if self.count != 1 else ''} …"


def changes(
    timeline: Timeline, context: int = DIFF_CONTEXT, limit: int = DIFF_ROWS
) -> list[Window | Folded]:
    """Return the diff view: windows of changed or faulty rows (± `context`) and the runs between.

    At most `limit` rows are shown; what lies past them is one last Folded run
    (which the page links to the full side-by-side at its start).
    """
    total = timeline.row_count
    wanted = (
        TimelineRow.objects.filter(timeline=timeline)
        .filter(Q(faulty=True) | ~Q(status=RowStatus.SAME))
        .order_by("position")
        .values_list("position", flat=True)[:limit]
    )
    spans: list[list[int]] = []
    for position in wanted:
        start, end = max(position - context, 0), min(position + context, total - 1)
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    shown: list[tuple[int, int]] = []
    budget = limit
    for start, end in spans:
        if budget <= 0:
            break
        end = min(end, start + budget - 1)
        shown.append((start, end))
        budget -= end - start + 1
    rows: list[TimelineRow] = []
    for k in range(0, len(shown), 50):  # a few ranges per query keep the SQL short
        where = Q()
        for start, end in shown[k : k + 50]:
            where |= Q(position__range=(start, end))
        rows += list(TimelineRow.objects.filter(timeline=timeline).filter(where))
    rows.sort(key=lambda row: row.position)
    by_position = {row.position: row for row in rows}
    out: list[Window | Folded] = []
    cursor = 0
    for start, end in shown:
        if start > cursor:
            out.append(Folded(cursor, start - cursor))
        run = [by_position[p] for p in range(start, end + 1) if p in by_position]
        out.append(Window(_show(timeline, run), more_before=False, more_after=False))
        cursor = end + 1
    if cursor < total:
        out.append(Folded(cursor, total - cursor))
    return out
