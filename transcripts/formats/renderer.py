"""Write a repaired transcript back in its own format, byte-faithfully.

Every record no op touches is spliced verbatim from the raw source, with its
separators and line ends; new and changed records follow the file's own
style (DESIGN.md contract 6). Tree formats are re-linked along each branch.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from transcripts.core.branch import branch_arrays, path_from, positions, reattached
from transcripts.core.layout import SPLITS, Slot, leaf_last, sparse_layout
from transcripts.core.model import Op, OpKind, Plan, RawSource, Record, Role, Transcript
from transcripts.core.store import RecordStore
from transcripts.formats._json import member_span
from transcripts.formats.base import Format
from transcripts.formats.loader import classify_record
from transcripts.formats.registry import FORMATS
from transcripts.formats.source import CHUNK, FileSource


def _paths(transcript: Transcript, resumed: tuple[int, ...]) -> list[Sequence[int]]:
    """Return the branches whose links a repair writes: `branch_paths`, then `resumed`'s.

    Read only: the kept arrays (`branch_arrays`), not a list of each.
    """
    return [*branch_arrays(transcript), *(path_from(transcript, leaf) for leaf in resumed)]


def _relink(
    transcript: Transcript,
    fmt: Format,
    at: dict[int, list[Slot]],
    resumed: tuple[int, ...] = (),
    written: dict[int, list[Slot]] | None = None,
) -> dict[int | Slot, str]:
    """Return new parent ids for records whose predecessor on a branch changed.

    `at` is the sparse layout (records it lacks are written as they were);
    `resumed` the leaves of the branches the repair resumes from (`Plan.resumed`);
    `written` the layout as the file is written (`leaf_last` of `at`), when the
    caller has it. Keys are raw record indexes, or the Slot of a new record.
    """
    # A record whose parent link closes a loop is written as its branch's root
    # (`detect._loop_faults`): the walk up the branch ends there, as Pairfix reads it.
    roots = frozenset(
        index
        for index, slots in at.items()
        for slot in slots
        if slot.record == index and any(op.kind is OpKind.RELINK for op in slot.ops)
    )
    parents: dict[int | Slot, str] = {}
    end = _moved_end(transcript, at, resumed, written)
    for k, path in enumerate(_paths(transcript, resumed)):
        parents.update(_relink_path(transcript, fmt, at, path, roots, end if k == 0 else None))
    for index in roots:
        parents.setdefault(index, ROOT)
    _relink_dangling(transcript, at, parents, fmt.lost_parent_falls_back, roots)
    return parents


# The parent id, in `_relink`'s answer, of a record written with a null parent.
ROOT = "\x00root"


def _written_parent(parent: str) -> str | None:
    """Return the parent id `_relink` gives, as written: None (null) for `ROOT`."""
    return None if parent == ROOT else parent


def _relink_dangling(
    transcript: Transcript,
    at: dict[int, list[Slot]],
    parents: dict[int | Slot, str],
    falls_back: bool = False,
    roots: frozenset[int] | set[int] = frozenset(),
) -> None:
    """Re-point, in `parents`, records whose parent the repair drops, but those already re-linked.

    A line of an abandoned branch (or of a chain no scope pairs, or the first
    line written of a branch whose start is dropped) hanging from a dropped
    record would name a uid the repaired file no longer holds, and read as a
    root of a chain of its own: it is pointed to that record's parent
    instead (the nearest one written). A dropped root's children are left as
    they are, and so are those of a uid another record that stays also
    holds. With `falls_back` (`Format.lost_parent_falls_back`: Claude Code,
    whose walk takes a parent it cannot find as the latest line before it
    in time, within 5 s), a line so left, or pointed to a uid no line holds,
    would be read under an earlier line the repair never paired: it is
    written with a null parent (`ROOT`), the root it was read as. A dropped
    record in `roots` (one written as a root, its parent closing a loop)
    has no parent to point to.
    """
    records = transcript.records
    gone: dict[str, str | None] = {}
    dropped: set[int] = set()
    for index, slots in at.items():
        own = [slot for slot in slots if slot.record == index]
        uid = records[index].uid
        if own and all(slot.dropped for slot in own) and uid is not None:
            dropped.add(index)
            gone[uid] = None if index in roots else records[index].parent
    # A uid a record that stays also holds (a line logged twice) is not gone.
    if isinstance(records, RecordStore):
        holders = records.holding_uids(gone) if gone else {}
    else:
        holders = {r.index: r.uid for r in records if r.uid is not None and r.uid in gone}
    for index, uid in holders.items():
        if index not in dropped:
            gone.pop(uid, None)
    if not gone:
        return
    candidates: list[tuple[int, str | None]]
    if isinstance(records, RecordStore):
        # Every record whose parent is not the uid of the record before it, and the one
        # after each dropped record: no view of every record.
        candidates = list(records.parents_apart())
        candidates += [(i + 1, records[i + 1].parent) for i in dropped if i + 1 < len(records)]
    else:
        candidates = [(record.index, record.parent) for record in records]
    held: Callable[[str], bool] | None = None
    if falls_back:
        if isinstance(records, RecordStore):
            store = records

            def held(uid: str) -> bool:
                return store.first_with_uid(uid) is not None
        else:
            uids = {r.uid for r in records if r.uid is not None}
            held = uids.__contains__
    for index, named in candidates:
        if named not in gone or index in parents or index in dropped:
            continue
        parent: str | None = named
        seen: set[str] = set()
        while parent is not None and parent in gone and parent not in seen:
            seen.add(parent)
            parent = gone[parent]
        if held is not None and (parent is None or parent in gone or not held(parent)):
            parents[index] = ROOT
        elif parent is not None:
            parents[index] = parent


def _written_link(record: Record) -> str | None:
    """Return the parent id `record` was written with: a link the reader mended, as written."""
    mended = record.relinked_from  # "" stands for a null parentId the reader mended
    return record.parent if mended is None else mended or None


def _moved_end(
    transcript: Transcript,
    at: dict[int, list[Slot]],
    resumed: tuple[int, ...],
    written: dict[int, list[Slot]] | None = None,
) -> int | None:
    """Return the record `leaf_last` writes last as the live branch's end, if it moves one.

    Written last, it is the leaf: the walk up the links starts there, so its
    link must be the record before it on the branch (`_relink_path`). A Claude
    Code result written before its call keeps its link to the line before the
    call (`_reattached`) only while another line of the branch ends the file.
    None when nothing moves, or what moves is a new record (linked anyway).
    """
    if transcript.last_copy:
        return None  # pi's re-attached records are re-linked all the same
    moved = leaf_last(transcript, at, resumed) if written is None else written
    if moved is at:
        return None
    last = moved[len(transcript.records) - 1][-1]
    return last.record if last.moved_in else None


def _relink_path(
    transcript: Transcript,
    fmt: Format,
    at: dict[int, list[Slot]],
    path: Sequence[int],
    roots: frozenset[int] = frozenset(),
    end: int | None = None,
) -> dict[int | Slot, str]:
    """Return new parent ids along one branch `path` (root first); see `_relink`.

    `end` (`_moved_end`), written at the end of the file, is linked to the
    record before it on the branch, as a re-attached record is.

    The first record written of a branch whose first records are moved
    away (a result written before its call) takes the link the branch's
    first record was written with (null for one of `roots`): left as it
    was, it kept its link to the moved record, whose new link pointed back
    at it, a loop. One after records dropped only is `_relink_dangling`'s.
    """
    records = transcript.records
    parents: dict[int | Slot, str] = {}
    previous: int | None = None  # raw index of the record written just before, if any
    previous_uid: str | None = None
    top: str | None = None  # the link above the branch, read when a record needs it
    moved_off = False  # a record before any written on the branch is moved away

    def link(index: int) -> str | None:
        # The link a record has before this branch is written: null for one of `roots`.
        return None if index in roots else _written_link(records[index])

    # A record written as it was after its own predecessor keeps its link: nothing to
    # look at but its uid, read only when a record after it needs it (`pending`).
    # A record without a uid can be no record's parent: the next one re-linked takes the
    # nearest uid before it on the branch (written `""`, it named no record and broke the
    # chain).
    pending: int | None = None
    skipped = 0  # where on the path the records passed over since `previous_uid` begin
    attached = _reattached(transcript, path)
    if end is not None:
        attached |= {end}
    # The places of the records the layout holds or that are re-attached: a run of others
    # between two of them, after one written as it was, is passed over at once.
    marks = iter([*positions(path, {*at, *attached}, len(records)), len(path)])
    mark = next(marks)
    k = -1
    while k + 1 < len(path):
        k += 1
        while mark < k:
            mark = next(marks)
        index = path[k]
        before = path[k - 1] if k else None
        slots = at.get(index)
        if slots is None and before == previous and index not in attached:
            if pending is None:
                skipped = k
            k = mark - 1  # the last place before the next mark
            previous = pending = path[k]
            continue
        if pending is not None:
            held = (records[path[j]].uid for j in range(k - 1, skipped - 1, -1))
            previous_uid = next((uid for uid in held if uid is not None), previous_uid)
            pending = None
        placed: Sequence[Slot | None] = slots or (None,)
        for slot in placed:
            if slot is not None and not slot.written:
                moved_off = moved_off or slot.moved_away
                continue
            if previous_uid is not None:
                if slot is not None and slot.record is None:
                    parents[slot] = previous_uid
                else:
                    moved = slot is not None and slot.moved_in
                    own = index if slot is None or slot.record is None else slot.record
                    record = records[own]
                    unchanged = not moved and (
                        record.boundary or (before == previous and own not in attached)
                    )
                    # A link the reader mended is written out as mended (pi's own walk
                    # would stop at the id the record was written with).
                    if not unchanged and link(own) != previous_uid:
                        parents[own] = previous_uid
            elif moved_off and (slot is None or slot.record is not None):
                # The first record written on the branch, one before it moved away: it
                # takes the link of the branch's first record, at the top.
                own = index if slot is None or slot.record is None else slot.record
                if top is None:
                    top = link(path[0]) or ROOT
                if (link(own) or ROOT) != top:
                    parents[own] = top
            if slot is None or slot.record is not None:
                written = index if slot is None or slot.record is None else slot.record
                previous = written
                uid = records[written].uid  # "" is an id: only None is no parent
                previous_uid = uid if uid is not None else previous_uid
            else:
                previous = None
                previous_uid = fmt.new_uid(transcript, slot.op) if slot.op else ""
    return parents


def _reattached(transcript: Transcript, path: Sequence[int]) -> frozenset[int]:
    """Return the records of `path` whose own parent link is not the record before them there.

    Those `branch.live_path` re-attached after their call (a result parented
    on a later line of the branch). Claude Code re-attaches them itself on
    resume, so their links stay; pi walks `parentId` alone (session-manager.js
    `buildSessionContext`) and would not send them, so in a pi file
    (`Transcript.last_copy`) a repair links each to the record written before
    it on the branch. Linked as written, one whose parent is written after it
    on the branch made a parent loop (a call re-linked under it, it under the
    call). Empty for other formats.
    """
    if not transcript.last_copy or not transcript.tree:
        return frozenset()
    return frozenset(reattached(transcript, path))


def _rekeep(
    transcript: Transcript, fmt: Format, at: dict[int, list[Slot]], resumed: tuple[int, ...] = ()
) -> dict[int, str]:
    """Return new first-kept ids for compactions whose first kept record the repair drops.

    pi keeps nothing before a compaction whose `firstKeptEntryId` it cannot
    find, so the compaction is pointed at the next record written on its path.
    Keys are raw record indexes of compactions.
    """
    records = transcript.records
    keeps: dict[int, str] = {}
    if not fmt.keep_key:
        return keeps
    # A stored session's compactions and uids are read from its columns, not from a view
    # of each record on the path.
    marks = records.context_marks() if isinstance(records, RecordStore) else None
    for path in _paths(transcript, resumed):
        if marks is None:
            compactions = [(k, keep) for k, i in enumerate(path) if (keep := records[i].keep_from)]
        else:
            keep_of = marks[1]
            found = positions(path, keep_of, len(records))
            compactions = [(k, keep) for k in found if (keep := keep_of[path[k]])]
        if not compactions:
            continue
        # Where each kept id first occurs on the path, found in one walk (not one per
        # compaction: a long pi session holds thousands).
        wanted = {keep for _, keep in compactions}
        first_at: dict[str, int] = {}
        if isinstance(records, RecordStore) and marks is not None:
            holders = records.holding_uids(wanted)
            for k in positions(path, holders, len(records)):
                first_at.setdefault(holders[path[k]], k)
        else:
            for k, index in enumerate(path):
                uid = records[index].uid
                if uid is not None and uid in wanted and uid not in first_at:
                    first_at[uid] = k
        for kc, keep in compactions:
            compaction = path[kc]
            first = first_at.get(keep)
            if first is None or first >= kc:
                continue
            for index in (path[j] for j in range(first, kc)):  # no walk up to `first`
                uid = _first_written_uid(transcript, fmt, index, at.get(index) or (None,))
                if uid is not None:
                    if uid != keep:
                        keeps[compaction] = uid
                    break
    return keeps


def _first_written_uid(
    transcript: Transcript, fmt: Format, index: int, placed: Sequence[Slot | None]
) -> str | None:
    """Return the uid of the first record written at `index`'s place (None: none is)."""
    for slot in placed:
        if slot is None:
            return transcript.records[index].uid
        if slot.written and slot.record is not None:
            return transcript.records[slot.record].uid
        if slot.written and slot.op is not None:
            return fmt.new_uid(transcript, slot.op)
    return None


def _with_keep(text: str, fmt: Format, keep: str) -> str:
    """Return a record's JSON text with its `fmt.keep_key` member set to `keep`."""
    span = member_span(text, fmt.keep_key)
    if span is None:
        return json.dumps(dict(json.loads(text), **{fmt.keep_key: keep}))
    return text[: span[0]] + json.dumps(keep) + text[span[1] :]


def _new_record(transcript: Transcript, fmt: Format, slot: Slot) -> Any:
    assert slot.op is not None
    if slot.op.kind in SPLITS:
        return fmt.split(transcript, slot.op)
    if len(slot.ops) > 1:
        return fmt.synthetic_group(transcript, slot.ops)
    if slot.op.record is None:
        return fmt.synthetic(transcript, slot.op)
    return fmt.carry(transcript, slot.op)


def _encode(transcript: Transcript, obj: Any) -> bytes:
    element = transcript.style.element
    assert element is not None  # a record to write was read from a record that parsed
    return element.dumps(obj).encode()


def _slot_value(
    transcript: Transcript, fmt: Format, slot: Slot, parents: dict[int | Slot, str]
) -> Any:
    """Return the JSON value of a new record, or of one written with other blocks.

    None for a record whose own bytes are written (with a new parent link, if any).
    """
    if slot.record is None:
        obj = _new_record(transcript, fmt, slot)
        if slot in parents:
            obj[fmt.parent_key] = _written_parent(parents[slot])
        return obj
    record = transcript.records[slot.record]
    if slot.block_order is None:
        if slot.record not in transcript.style.renamed:
            return None
        obj = dict(record.obj)
        if slot.record in parents:
            obj[fmt.parent_key] = _written_parent(parents[slot.record])
        return obj
    placed = tuple((op.at, fmt.inline_result(transcript, op)) for op in slot.inserted)
    obj = fmt.keep(record.obj, list(slot.block_order), placed)
    new_parent = parents.get(slot.record)
    if new_parent is not None:
        obj[fmt.parent_key] = _written_parent(new_parent)
    return obj


def _record_bytes(
    transcript: Transcript,
    fmt: Format,
    slot: Slot,
    parents: dict[int | Slot, str],
    keeps: dict[int, str] | None = None,
) -> bytes:
    obj = _slot_value(transcript, fmt, slot, parents)
    if obj is not None:
        return _encode(transcript, obj)
    assert slot.record is not None
    record = transcript.records[slot.record]
    raw = transcript.raw[record.start : record.end]
    keep = (keeps or {}).get(slot.record)
    if keep is not None:
        raw = _with_keep(raw.decode("utf-8"), fmt, keep).encode()
    new_parent = parents.get(slot.record)
    if new_parent is not None:
        written = _written_parent(new_parent)
        text = raw.decode("utf-8")
        span = member_span(text, fmt.parent_key)
        if span is None:
            return _encode(transcript, dict(json.loads(text), **{fmt.parent_key: written}))
        return (text[: span[0]] + json.dumps(written) + text[span[1] :]).encode()
    return raw


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What repairing a transcript changes, as reading the repaired file would see it.

    `record_count` is how many records the repaired file holds; `replaced` the
    raw indexes of the records it drops or writes with other blocks; `records`
    the records it writes new or with other blocks, each classified from the
    very value `render` encodes for it (`index` -1 for a new record); `placed`
    the insert and move ops whose result the repaired file holds.
    """

    record_count: int
    replaced: frozenset[int]
    records: tuple[Record, ...]
    placed: frozenset[Op]


@dataclass(slots=True)
class _Renamed(Record):
    """A record whose tool call ids a plan renames: its value is renamed each time it is read.

    Nothing is held but the renames: a long session with many ids to rename
    keeps no parsed copy of each such record (its `parsed`, when the file was
    read whole, is the shared original, copied before renaming).
    """

    renames: tuple[tuple[int, str], ...] = ()
    format: str = ""

    @property
    def obj(self) -> Any:
        """Return the record's JSON value with its call ids renamed (a new value each time)."""
        original = Record.obj.fget(self)  # type: ignore[attr-defined]
        obj = copy.deepcopy(original) if self.parsed is not None else original
        for block, new_id in self.renames:
            FORMATS[self.format].rename_id(obj, block, new_id)
        return obj

    @obj.setter
    def obj(self, value: Any) -> None:
        raise TypeError("a renamed record's value is its original's, renamed")


def _renamed(transcript: Transcript, fmt: Format, plan: Plan) -> Transcript:
    """Return `transcript` with the tool call ids the plan's `rename_id` ops give.

    The renamed records read as their new JSON value (the raw one is untouched),
    and `style.renamed` names them, so that they are written anew.
    """
    renames: dict[int, list[tuple[int, str]]] = {}
    for op in plan.ops:
        if op.kind is OpKind.RENAME_ID and op.record is not None:
            renames.setdefault(op.record, []).append((op.block or 0, op.text))
    if not renames:
        return transcript
    renamed: dict[int, Record] = {}
    for index, items in renames.items():
        record = transcript.records[index]
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(Record)}
        values["_rare"] = dict(record._rare) if record._rare else None  # its own, not shared
        renamed[index] = _Renamed(**values, renames=tuple(items), format=fmt.id)
    records: list[Record]
    if isinstance(transcript.records, RecordStore):
        # Not a list of every record: a streamed session's store, these few replaced.
        records = transcript.records.replaced(renamed)
    else:
        records = list(transcript.records)
        for index, record in renamed.items():
            records[index] = record
    style = dataclasses.replace(transcript.style, renamed=frozenset(renames))
    renamed_transcript = dataclasses.replace(transcript, records=records, style=style)
    # A renamed record reads as its original in every field a branch walk reads (only
    # its JSON value is renamed): the branches found already are still the branches.
    renamed_transcript.paths = transcript.paths
    return renamed_transcript


def rewrite(transcript: Transcript, plan: Plan) -> Rewrite:
    """Return what repairing `transcript` by `plan` changes, without rendering or reading the file.

    Costs the records the plan touches, not the whole file. A record moved
    whole, or re-linked to a new parent, keeps its blocks: it is neither
    replaced nor listed.
    """
    fmt = FORMATS[transcript.format]
    transcript = _renamed(transcript, fmt, plan)
    at = sparse_layout(transcript, plan)
    parents = _relink(transcript, fmt, at, plan.resumed) if transcript.tree else {}
    count = len(transcript.records)
    replaced: set[int] = set()
    records: list[Record] = []
    placed: set[Op] = set()
    for index, slots in at.items():
        count += sum(slot.written for slot in slots) - 1
        for slot in slots:
            if slot.record == index and (slot.dropped or slot.block_order is not None):
                replaced.add(index)
            if not slot.written:
                continue
            # A record's own slot lists the ops that take blocks out of it too.
            if slot.record is None or slot.moved_in:
                placed.update(slot.ops)
            placed.update(slot.inserted)
            obj = _slot_value(transcript, fmt, slot, parents)
            if obj is None:
                continue
            record = Record(-1 if slot.record is None else slot.record, 0, 0, Role.META, "")
            if isinstance(obj, dict):
                classify_record(fmt, obj, record, transcript.filename)
            else:
                record.error = f"{transcript.filename}: a record that is not a JSON object"
            records.append(record)
    return Rewrite(count, frozenset(replaced), tuple(records), frozenset(placed))


def relinked(transcript: Transcript, plan: Plan) -> frozenset[int]:
    """Return the raw indexes of the records `render` writes with another parent id.

    Those a tree format re-links because the record before them on their
    branch is dropped, moved or followed by an inserted one; they are
    written as they were but for that id. Empty for other formats.
    """
    if not transcript.tree or not plan:
        return frozenset()
    fmt = FORMATS[transcript.format]
    transcript = _renamed(transcript, fmt, plan)
    parents = _relink(transcript, fmt, sparse_layout(transcript, plan), plan.resumed)
    return frozenset(key for key in parents if isinstance(key, int))


def render(transcript: Transcript, plan: Plan) -> bytes:
    """Return the bytes of `transcript` repaired by `plan` (see `render_to`)."""
    if not plan and isinstance(transcript.raw, bytes):
        return transcript.raw
    out = io.BytesIO()
    render_to(transcript, plan, out)
    return out.getvalue()


def render_to(transcript: Transcript, plan: Plan, out: BinaryIO) -> None:
    """Write `transcript` repaired by `plan` to `out`, in the file's own format.

    Untouched records are copied byte for byte, with their separators, line
    ends and the file's final newline (or lack of one; an agent's JSON lines
    get one, see `_write_lines`), straight from the raw
    source in large runs; new and changed records follow the file's style. An
    empty plan writes the raw bytes.
    """
    writer = _Writer(transcript.raw, out)
    if not plan or not transcript.records:
        writer.raw(0, len(transcript.raw))
        writer.flush()
        return
    fmt = FORMATS[transcript.format]
    transcript = _renamed(transcript, fmt, plan)
    at = sparse_layout(transcript, plan)
    if transcript.tree:
        # Links follow the branch (`at`); the file keeps the branch's end last (`leaf_last`).
        written = leaf_last(transcript, at, plan.resumed)
        parents = _relink(transcript, fmt, at, plan.resumed, written)
        keeps = _rekeep(transcript, fmt, at, plan.resumed)
        at = written
    else:
        parents, keeps = {}, {}
    if fmt.jsonl:
        _write_lines(transcript, fmt, at, parents, writer, keeps)
    else:
        _write_elements(transcript, fmt, at, parents, keeps, writer)
    writer.flush()


class _Writer:
    """Write to `out`, copying runs of untouched raw bytes from the source in one go."""

    def __init__(self, data: bytes | RawSource, out: BinaryIO) -> None:
        self.data = data
        self.out = out
        self.run: tuple[int, int] | None = None

    def raw(self, start: int, stop: int) -> None:
        """Queue the raw bytes from `start` to `stop`, joining a run that ends at `start`."""
        if self.run is not None and self.run[1] == start:
            self.run = (self.run[0], stop)
            return
        self.flush()
        self.run = (start, stop)

    def bytes(self, data: bytes) -> None:
        """Write new bytes after whatever raw run is queued."""
        self.flush()
        self.out.write(data)

    def flush(self) -> None:
        """Write the queued raw run."""
        if self.run is None:
            return
        start, stop = self.run
        self.run = None
        if isinstance(self.data, bytes):
            self.out.write(memoryview(self.data)[start:stop])
        elif isinstance(self.data, FileSource):
            self.data.copy_to(self.out, start, stop)
        else:
            for offset in range(start, stop, CHUNK):
                self.out.write(self.data[offset : min(stop, offset + CHUNK)])


def _own(slot: Slot) -> int | None:
    """Return the raw index of a record written at its own place, else None."""
    return slot.record if not slot.moved_in else None


def _write_lines(
    transcript: Transcript,
    fmt: Format,
    at: dict[int, list[Slot]],
    parents: dict[int | Slot, str],
    writer: _Writer,
    keeps: dict[int, str],
) -> None:
    """Write JSONL records, each followed by its own line end (and any blank lines after it).

    Records the sparse layout `at` lacks, and whose parent stays, are copied
    as they were; the file's final newline, or lack of one, is kept, but an
    agent's own file (`Transcript.agent`) is given one. Only the
    records a plan touches (and the last ones) are looked at one by one: the
    lines between them go out as one run of raw bytes, line ends and blank
    lines included, so a long session costs its changes, not its length.
    """
    data, records = transcript.raw, transcript.records
    eol = transcript.style.eol
    last = _last_written(at, len(records))
    # A cut last line that the repair drops takes the open end with it: the agent's
    # next line must start on a line of its own. An agent's own file always ends with a
    # line end once repaired: the agent appends `JSON + "\n"` (Claude Code, Codex, pi),
    # so an open last line, cut or whole, would swallow its next record.
    cut = records[-1].error is not None and any(s.dropped for s in at.get(len(records) - 1, ()))
    ends_open = not data.endswith(b"\n") and not cut and not transcript.agent

    def write(i: int, record: Record) -> None:
        here: Sequence[Slot | None] = at.get(i) or (None,)
        for slot in here:
            if slot is not None and not slot.written:
                continue
            own = i if slot is None else _own(slot)
            if slot is None and i not in parents and i not in keeps:
                writer.raw(record.start, record.end)
            else:
                writer.bytes(_record_bytes(transcript, fmt, slot or Slot(i), parents, keeps))
            if ends_open and (i, slot) == last:
                continue  # the file had no final newline; neither has its repair
            if own is not None:
                following = records[own + 1].start if own + 1 < len(records) else len(data)
                if following > records[own].end:
                    writer.raw(records[own].end, following)
                    continue
            writer.bytes(eol)

    # Every other record is written as it was, up to the next record's start: a line
    # ends before the next one starts, so its end and what follows are raw bytes too.
    looked_at = {*at, *keeps, len(records) - 1}
    looked_at.update(k for k in parents if isinstance(k, int))
    if last is not None:
        looked_at.add(last[0])
    writer.raw(0, records[0].start)
    done = 0  # the records before this index are written
    for i in sorted(looked_at):
        record = records[i]
        if i > done:
            writer.raw(records[done].start, record.start)
        write(i, record)
        done = i + 1


def _last_written(at: dict[int, list[Slot]], count: int) -> tuple[int, Slot | None] | None:
    """Return (record index, slot or None for an untouched record) of the last item written."""
    for i in range(count - 1, -1, -1):
        items = at.get(i)
        if items is None:
            return (i, None)
        written = [slot for slot in items if slot.written]
        if written:
            return (i, written[-1])
    return None


def _write_elements(
    transcript: Transcript,
    fmt: Format,
    at: dict[int, list[Slot]],
    parents: dict[int | Slot, str],
    keeps: dict[int, str],
    writer: _Writer,
) -> None:
    """Write array elements, keeping the original separator between neighbours that stay.

    Records the sparse layout `at` lacks, and that keep their parent, are
    untouched: each run of them is copied from the raw source in one piece,
    separators and all.
    """
    records = transcript.records
    changed = sorted(
        set(at).union(keeps, transcript.style.renamed, (k for k in parents if isinstance(k, int)))
    )
    sep = transcript.style.sep
    writer.raw(0, records[0].start)
    previous: int | None = None  # raw index of the record written last (None: a new one)
    written = False
    following = 0  # the first record not yet written
    for index in [*changed, len(records)]:
        if following < index:  # untouched records: one raw run
            if written:
                if previous is not None and following == previous + 1:
                    writer.raw(records[previous].end, records[following].start)
                else:
                    writer.bytes(sep)
            writer.raw(records[following].start, records[index - 1].end)
            previous, written = index - 1, True
        if index == len(records):
            break
        for slot in at.get(index) or (Slot(index),):
            if not slot.written:
                continue
            own = _own(slot)
            if written:
                if own is not None and previous is not None and own == previous + 1:
                    writer.raw(records[previous].end, records[own].start)
                else:
                    writer.bytes(sep)
            renamed = own is not None and own in transcript.style.renamed
            if (
                own is not None
                and slot.block_order is None
                and own not in parents
                and own not in keeps
                and not renamed
            ):
                writer.raw(records[own].start, records[own].end)
            else:
                writer.bytes(_record_bytes(transcript, fmt, slot, parents, keeps))
            previous, written = own, True
        following = index + 1
    writer.raw(records[-1].end, len(transcript.raw))
