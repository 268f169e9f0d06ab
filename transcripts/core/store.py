"""Records of a streamed session kept as columns, read back as light views.

A Record object with its calls, results and id strings costs about 500 bytes;
a session of a million lines would hold half a gigabyte of them. A
RecordStore keeps each record as a few machine integers in `array` columns
and its strings as UTF-8 bytes in one arena, and `store[i]` returns a
StoredRecord: a Record whose attributes read and write those columns. What
the rest of the engine sees is a list of Records, as before.
"""

from __future__ import annotations

import sys
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import chain, compress, count, islice
from operator import itemgetter
from typing import Any, SupportsIndex, overload

from transcripts.core.model import (
    _BOUNDARY,
    _LINE_BITS,
    _LINE_MASK,
    _LINE_SHIFT,
    _RARE_DEFAULTS,
    _SPAN_BITS,
    _SPAN_MASK,
    Record,
    Role,
    ToolCall,
    ToolResult,
)

_NONE = -1  # the reference of a field left at its default (None, or "" for a text)
_BLANK = 0  # the reference of "" where it was given (only "" has length 0 in the arena)
# A string's reference packs (arena offset << _LENGTH_BITS) | its length in bytes; a
# longer string is kept whole in `_long`, its reference -2 for the first, -3 for the next.
# The length _UUID marks a UUID in canonical form (Claude Code's ids) kept as its 16 bytes.
_LENGTH_BITS = 24
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1
_UUID = _LENGTH_MASK


def _uuid_text(packed: bytes | bytearray) -> str:
    """Return the canonical text (lowercase, hyphenated) of a UUID's 16 bytes."""
    h = packed.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _uuid_bytes(text: str) -> bytes | None:
    """Return the 16 bytes of `text` when it is a UUID in canonical form, else None."""
    if len(text) != 36 or not text[8] == text[13] == text[18] == text[23] == "-":
        return None
    digits = text.replace("-", "")
    try:
        packed = bytes.fromhex(digits)
    except ValueError:
        return None
    # fromhex also takes spaces (then fewer than 16 bytes) and capitals: 32 lowercase digits.
    return packed if len(packed) == 16 and (digits.islower() or digits.isdigit()) else None


# Columns grow a chunk at a time, and chunks never move: an array grown by realloc
# leaves holes in the heap behind it, which would cost a long session as much again.
_CHUNK_BITS = 12
_CHUNK_MASK = (1 << _CHUNK_BITS) - 1
_ARENA_BITS = 18  # strings are kept in chunks of 256 KiB; a longer one in `_long`
_ARENA_CHUNK = 1 << _ARENA_BITS


class _Column:
    """An array of machine integers of type `code`, in chunks of 2**_CHUNK_BITS values.

    Supports `append`, `len`, iteration and indexing by non-negative ints; a
    hot loop may read `chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK]` itself. The
    store's per-record columns are filled slot by slot after `grow` instead,
    and are as long as the store.
    """

    __slots__ = ("_code", "chunks", "_size")

    def __init__(self, code: str) -> None:
        self._code = code
        self.chunks: list[array[int]] = []
        self._size = 0

    def append(self, value: int) -> None:
        slot = self._size & _CHUNK_MASK
        if not slot:
            self.chunks.append(array(self._code, [0]) * (_CHUNK_MASK + 1))
        self.chunks[-1][slot] = value
        self._size += 1

    def grow(self) -> None:
        """Add a chunk of zeros."""
        self.chunks.append(array(self._code, [0]) * (_CHUNK_MASK + 1))

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> int:
        return self.chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK]

    def __setitem__(self, index: int, value: int) -> None:
        self.chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK] = value

    def __iter__(self) -> Iterator[int]:
        left = self._size
        for chunk in self.chunks:
            yield from chunk[: min(left, len(chunk))]
            left -= len(chunk)


# Flags of a chunk's values are tested a chunk at a time as the bytes of one int: a byte
# per value, 1 where the test holds. `_TRUTH` maps a byte to 1 unless it is 0, `_FALSITY`
# to 1 where it is 0.
_TRUTH = bytes([0] + [1] * 255)
_FALSITY = bytes([1] + [0] * 255)


def _packed(values: array[int]) -> int:
    """Return the machine bytes of `values` as one int, in the machine's byte order.

    So adding two such ints adds their items, each in its own bytes, as long
    as no item's sum overflows it.
    """
    return int.from_bytes(values, sys.byteorder)


def _nonzero(packed: int, width: int, items: int) -> int:
    """Return a flag per item of `packed` (`items` values of `width` bytes): 1 where it is not 0."""
    data = packed.to_bytes(items * width, sys.byteorder)
    folded = 0
    for k in range(width):  # OR of each item's bytes, in its first byte's place
        folded |= int.from_bytes(data[k::width], "little")
    return int.from_bytes(folded.to_bytes(items, "little").translate(_TRUTH), "little")


def _indexes(flags: int, items: int, base: int) -> Iterator[int]:
    """Yield `base` + the position of each flag set among `items` flags (see `_nonzero`)."""
    data = flags.to_bytes(items, "little")
    at = data.find(1)
    while at >= 0:
        yield base + at
        at = data.find(1, at + 1)


_RECENT = 4096  # call ids, tool names and kinds remembered for later strings to share
_ROLES = tuple(Role)
_ROLE_CODE = {role: code for code, role in enumerate(_ROLES)}
# A record's calls (or results) column packs (first row << _COUNT_BITS) | count in 32
# bits; a record whose calls do not fit (63 or more, or rows past 2**26) keeps a list.
_COUNT_BITS = 6
_COUNT_MASK = (1 << _COUNT_BITS) - 1
_ROWS_LIMIT = 1 << (32 - _COUNT_BITS)
_ROLE_BITS = 3  # a record's kind column packs (kind code << _ROLE_BITS) | role code
_ROLE_MASK = (1 << _ROLE_BITS) - 1
_WIDE = 0xFFFFFFFF  # in a 32-bit column: the value is in the column's dict instead
_HASH_MASK = 0xFFFFFFFF  # the bits of a uid's hash the store keeps
# What `RecordStore.pairing_rows` gives of a record: role, bits, message id,
# calls (block, id, name) and results (block, tool call id, text).
PairingRow = tuple[
    Role, int, str | None, Sequence[tuple[int, str, str]], Sequence[tuple[int, str, str]]
]


def _fit_rows(items: list[ToolCall] | list[ToolResult], index: int, first: int) -> bool:
    """Return True when record `index`'s calls (or results) fit the rows from row `first`.

    They do when there are fewer than 63, the rows stay below 2**26, and each
    is the record's own with a block that fits 32 bits; else the record keeps a list.
    """
    return (
        len(items) < _COUNT_MASK
        and first + len(items) < _ROWS_LIMIT
        and all(item.record == index and item.block < _WIDE for item in items)
    )


def _rows_fit(rows: Sequence[tuple[Any, ...]], first: int) -> bool:
    """Return True when rows (block first, in block order) fit the rows from row `first`."""
    return len(rows) < _COUNT_MASK and first + len(rows) < _ROWS_LIMIT and rows[-1][0] < _WIDE


class Settled(list[Any]):
    """The calls or results of a settled record: changing it in place is refused.

    A stored record's are copies; SETTLED_EMPTY is the one shared empty list
    of every record that holds no calls or results (the loader's too).
    """

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a stored record's calls and results change only by assignment")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = _refuse  # type: ignore[assignment]


SETTLED_EMPTY: Any = Settled()


class RecordStore(list[Record]):
    """The records of one streamed file, in columns; `store[i]` is a StoredRecord view.

    Appending a Record copies it into the columns (the Record itself can then
    go). Indexing, slicing, iterating, `len` and `reversed` work as on a list
    of Records; the list's other changes (insert, delete, sort) raise
    TypeError. Every view's `source` is the store's `source`, from which a
    record's JSON is re-read on demand (`Record.obj`).

    Strings (ids, names, previews) are kept as UTF-8 in the chunks of
    `_arena`; a reference packs where one starts and its length. A record's
    parent that is the record before's uid, a message id of the record
    before, a result's id of a call read lately, and a recurring tool name or
    kind share one copy.
    """

    def __init__(self, source: Any) -> None:
        super().__init__()
        self.source = source
        self._arena: list[bytearray] = []  # chunks of _ARENA_CHUNK bytes
        self._arena_used = _ARENA_CHUNK  # bytes used of the last chunk
        self._long: list[str] = []
        # Offsets of a file below 4 GiB fit 32 bits.
        self._start = _Column("I" if len(source) < 1 << 32 else "q")
        self._size = _Column("I")  # end - start
        self._line = _Column("I")
        self._kind = _Column("I")
        self._bits = _Column("I")
        self._uid = _Column("q")
        self._parent = _Column("q")
        self._message = _Column("q")
        self._text = _Column("q")
        self._calls = _Column("I")
        self._results = _Column("I")
        # The low 32 bits of each uid's str hash (0 without one): the uid table is built,
        # and its probes compared, without reading a uid string back from the arena.
        self._uid_hash = _Column("I")
        self._count = 0
        self._columns = (
            *(self._start, self._size, self._line, self._kind, self._bits, self._uid),
            *(self._parent, self._message, self._text, self._calls, self._results),
            self._uid_hash,
        )
        self._tails: tuple[array[int], ...] = ()  # each column's last chunk, being filled
        self._read: dict[int, str] = {}  # strings read lately, by reference
        self._replaced: dict[int, Record] = {}  # see `replaced`
        self._kinds: list[str] = []  # kind code -> kind
        self._kind_codes: dict[str, int] = {}
        # Call rows: block, id, name, args; a problem or family in `_call_more`.
        self._call_block = _Column("I")
        self._call_id = _Column("q")
        self._call_name = _Column("q")
        self._call_args = _Column("q")
        self._call_more: dict[int, tuple[int, int]] = {}
        # Result rows: block, tool call id, text, is_error; a family in `_result_family`.
        self._result_block = _Column("I")
        self._result_id = _Column("q")
        self._result_text = _Column("q")
        self._result_error = _Column("B")
        self._result_family: dict[int, int] = {}
        # 32-bit columns' values that do not fit, by record index.
        self._wide_size: dict[int, int] = {}
        self._wide_bits: dict[int, int] = {}
        # Per record, only where set: the fields Record keeps in its `_rare` dict, a
        # parsed value, and calls or results that do not fit the rows (another record's).
        self._rare: dict[int, dict[str, Any]] = {}
        self._parsed: dict[int, Any] = {}
        self._odd_calls: dict[int, list[ToolCall]] = {}
        self._odd_results: dict[int, list[ToolResult]] = {}
        self._shared: dict[str, int] = {}  # recent strings worth sharing: ids, names, kinds
        self._last_uid: tuple[str | None, int] = (None, _NONE)
        self._uid_slots: array[int] | None = None  # see `first_with_uid`
        # The first record appended whose parent is the uid of the record before it (not
        # its own uid), or -1: the records are linked (see `chained`).
        self._chained = -1
        self._uid_first = bytearray()  # 1 for the record standing for each uid, with the slots
        # `_links`' flags with the `_uid_first` they were made from; a list that the copies
        # `replaced` makes share, so that a parent changed through either clears it.
        self._linked: list[tuple[bytearray, bytearray]] = []
        # This store and the copies `replaced` made of it, which share its columns: a uid
        # or parent changed through any of them leaves each one's uid table and link stale.
        self._sharing: list[weakref.ref[RecordStore]] | None = None
        self._last_copy = False  # see `stand_for_last`
        self._last_message: tuple[str | None, int] = (None, _NONE)

    # Strings ------------------------------------------------------------------------

    def _put(self, text: str | None) -> int:
        """Return the reference of `text` written to the arena (_NONE for None, _BLANK for "").

        "" is kept apart from None: an id given as "" is an id (the whole-file
        path's Record keeps it so), not a missing one.
        """
        if text is None:
            return _NONE
        if not text:
            return _BLANK
        packed = _uuid_bytes(text)
        data = packed if packed is not None else text.encode("utf-8", "surrogatepass")
        size = len(data)
        if size > _ARENA_CHUNK:
            self._long.append(text)
            return -1 - len(self._long)
        used = self._arena_used
        if used + size > _ARENA_CHUNK:
            self._arena.append(bytearray(_ARENA_CHUNK))
            used = 0
        self._arena[-1][used : used + size] = data
        self._arena_used = used + size
        at = ((len(self._arena) - 1) << _ARENA_BITS) | used
        return (at << _LENGTH_BITS) | (_UUID if packed is not None else size)

    def _put_shared(self, text: str | None) -> int:
        """Return the reference of `text`, shared with an equal string put lately."""
        if not text:
            return self._put(text)
        ref = self._shared.get(text)
        if ref is None:
            if len(self._shared) >= _RECENT:
                self._shared.clear()  # what recurs, recurs nearby: older strings not kept
            ref = self._shared[text] = self._put(text)
        return ref

    def _get(self, ref: int, default: Any = "") -> Any:
        """Return the string at `ref` (`default` for _NONE)."""
        text = self._read.get(ref)
        if text is not None:
            return text
        if ref <= 0:
            if ref == _BLANK:
                return ""
            return default if ref == _NONE else self._long[-2 - ref]
        at, size = ref >> _LENGTH_BITS, ref & _LENGTH_MASK
        chunk, at = self._arena[at >> _ARENA_BITS], at & (_ARENA_CHUNK - 1)
        if size == _UUID:
            text = _uuid_text(chunk[at : at + 16])
        else:
            text = chunk[at : at + size].decode("utf-8", "surrogatepass")
        # A walk reads a record's parent, then that record's own uid: the same string.
        if len(self._read) >= _RECENT:
            self._read.clear()
        self._read[ref] = text
        return text

    # Appending ----------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Copy `record` into the columns as the store's next record.

        Raises ValueError when `record.index` is not the store's length.
        """
        if record.index != self._count:
            raise ValueError(f"record {record.index} appended at {self._count}")
        at = record._at  # one read for the four numbers it packs
        self._add(
            (at >> _SPAN_BITS) & _SPAN_MASK,
            at & _SPAN_MASK,
            (at >> _LINE_SHIFT) & _LINE_MASK,
            record.kind,
            record.role,
            record._bits,
            record.uid,
            record.parent,
            record.message_id,
            record.text,
            record.calls,
            record.results,
        )
        index = self._count - 1
        if record._rare:
            self._rare[index] = dict(record._rare)
        if record.parsed is not None:
            self._parsed[index] = record.parsed

    def append_message(
        self,
        start: int,
        end: int,
        line: int,
        kind: str,
        role: Role,
        bits: int,
        uid: str | None,
        parent: str | None,
        message_id: str | None,
        calls: Sequence[tuple[int, str, str, str, str]],
        results: Sequence[tuple[int, str, bool, str]],
    ) -> None:
        """Append a record from its fields, as `append` would a Record holding them.

        `calls` are rows (block, id, name, args, problem) of the record's tool
        calls, `results` rows (block, tool call id, is_error, text) of its
        tool results, in block order; neither has a family. The record has no
        text, no parsed value and none of the fields a Record keeps in
        `_rare`; `bits` packs its flags and `other_blocks` (see
        `model.Record`). For a loader that reads what detection needs straight
        from a line's JSON, without a Record. Raises ValueError for offsets
        or a line a Record cannot hold.
        """
        if (start | end) >> _SPAN_BITS or line >> _LINE_BITS:
            raise ValueError(f"record offsets {start}-{end} or line {line} out of range")
        # `_add` written out for a record with no text and rows for its calls and results:
        # this runs once for nearly every line of a long session.
        index = self._count
        slot = index & _CHUNK_MASK
        if not slot:
            self._grow_tails()
        self._count = index + 1
        starts, sizes, lines, kinds, flags, uids, parents, messages, texts, *packs, hashes = (
            self._tails
        )
        starts[slot] = start
        if end - start < _WIDE:
            sizes[slot] = end - start
        else:
            self._set_size(index, end - start)
        lines[slot] = line
        code = self._kind_codes.get(kind)
        if code is None:
            self._set_kind(index, kind, role)
        else:
            kinds[slot] = (code << _ROLE_BITS) | _ROLE_CODE[role]
        if bits < _WIDE:
            flags[slot] = bits
        else:
            self._set_bits(index, bits)
        last_uid, last_ref = self._last_uid
        uid_ref = last_ref if uid == last_uid else self._put(uid)
        uids[slot] = uid_ref
        if uid is not None:
            hashes[slot] = hash(uid) & _HASH_MASK
        self._uid_slots = None
        if parent is not None and parent == last_uid:
            parents[slot] = last_ref
            if parent != uid and self._chained < 0:
                self._chained = index
        else:
            parents[slot] = self._put(parent)
        self._last_uid = (uid, uid_ref)
        if message_id is None:
            messages[slot] = _NONE
        else:
            last_message, message_ref = self._last_message
            if message_id != last_message:
                message_ref = self._put(message_id)
                self._last_message = (message_id, message_ref)
            messages[slot] = message_ref
        texts[slot] = _NONE
        if calls:
            first = len(self._call_block)
            if _rows_fit(calls, first):
                packs[0][slot] = (first << _COUNT_BITS) | len(calls)
                self._put_call_rows(first, calls)
            else:
                odd = [ToolCall(i, name, index, j, args, why) for j, i, name, args, why in calls]
                self._set_calls(index, odd)
        if results:
            first = len(self._result_block)
            if _rows_fit(results, first):
                packs[1][slot] = (first << _COUNT_BITS) | len(results)
                self._put_result_rows(results)
            else:
                odd_results = [ToolResult(i, index, j, bad, text) for j, i, bad, text in results]
                self._set_results(index, odd_results)

    def _grow_tails(self) -> None:
        """Add a chunk to each per-record column; `_tails` are then the new chunks."""
        for column in self._columns:
            column.grow()
        self._tails = tuple(column.chunks[-1] for column in self._columns)

    def _put_call_rows(self, first: int, calls: Sequence[tuple[int, str, str, str, str]]) -> None:
        shared, put = self._put_shared, self._put
        for row, (block, call_id, name, args, problem) in enumerate(calls, first):
            self._call_block.append(block)
            self._call_id.append(shared(call_id))
            self._call_name.append(shared(name))
            self._call_args.append(put(args))
            if problem:
                self._call_more[row] = (shared(problem), _BLANK)

    def _put_result_rows(self, results: Sequence[tuple[int, str, bool, str]]) -> None:
        shared, put = self._put_shared, self._put
        for block, tool_call_id, is_error, text in results:
            self._result_block.append(block)
            self._result_id.append(shared(tool_call_id))
            self._result_text.append(put(text))
            self._result_error.append(is_error)

    def _add(
        self,
        start: int,
        end: int,
        line: int,
        kind: str,
        role: Role,
        bits: int,
        uid: str | None,
        parent: str | None,
        message: str | None,
        text: str,
        calls: list[ToolCall] | None,
        results: list[ToolResult] | None,
    ) -> None:
        index = self._count
        slot = index & _CHUNK_MASK
        if not slot:
            self._grow_tails()
        self._count = index + 1
        tails = self._tails
        starts, sizes, lines, kinds, flags, uids, parents, messages, texts = tails[:9]
        starts[slot] = start
        if end - start < _WIDE:
            sizes[slot] = end - start
        else:
            self._set_size(index, end - start)
        lines[slot] = line
        code = self._kind_codes.get(kind)
        if code is None:
            self._set_kind(index, kind, role)
        else:
            kinds[slot] = (code << _ROLE_BITS) | _ROLE_CODE[role]
        if bits < _WIDE:
            flags[slot] = bits
        else:
            self._set_bits(index, bits)
        last_uid, last_ref = self._last_uid
        uid_ref = last_ref if uid == last_uid else self._put(uid)
        uids[slot] = uid_ref
        if uid is not None:
            tails[11][slot] = hash(uid) & _HASH_MASK
        self._uid_slots = None
        shared = parent is not None and parent == last_uid
        if shared and parent != uid and self._chained < 0:
            self._chained = index
        parents[slot] = last_ref if shared else self._put(parent)
        self._last_uid = (uid, uid_ref)
        if message is None:
            messages[slot] = _NONE
        else:
            last_message, message_ref = self._last_message
            if message != last_message:
                message_ref = self._put(message)
                self._last_message = (message, message_ref)
            messages[slot] = message_ref
        texts[slot] = self._put(text) if text else _NONE
        if calls:
            self._set_calls(index, calls)
        if results:
            self._set_results(index, results)

    def extend(self, records: Iterable[Record]) -> None:
        """Append each of `records` (see `append`)."""
        for record in records:
            self.append(record)

    def _set_size(self, index: int, size: int) -> None:
        self._wide_size.pop(index, None)
        if size >= _WIDE:
            self._wide_size[index] = size
            size = _WIDE
        self._size[index] = size

    def _end_of(self, index: int) -> int:
        size = self._size[index]
        return self._start[index] + (size if size != _WIDE else self._wide_size[index])

    def _set_bits(self, index: int, bits: int) -> None:
        self._wide_bits.pop(index, None)
        if bits >= _WIDE:
            self._wide_bits[index] = bits
            bits = _WIDE
        self._bits[index] = bits

    def _bits_of(self, index: int) -> int:
        bits = self._bits[index]
        return bits if bits != _WIDE else self._wide_bits[index]

    def _set_kind(self, index: int, kind: str, role: Role) -> None:
        code = self._kind_codes.get(kind)
        if code is None:
            code = self._kind_codes[kind] = len(self._kinds)
            self._kinds.append(kind)
        self._kind[index] = (code << _ROLE_BITS) | _ROLE_CODE[role]

    def _set_calls(self, index: int, calls: list[ToolCall]) -> None:
        self._odd_calls.pop(index, None)
        first = len(self._call_block)
        if not calls:
            self._calls[index] = 0
            return
        if not _fit_rows(calls, index, first):
            self._odd_calls[index] = list(calls)
            self._calls[index] = 0
            return
        self._calls[index] = (first << _COUNT_BITS) | len(calls)
        shared = self._put_shared
        for row, call in enumerate(calls, first):
            self._call_block.append(call.block)
            self._call_id.append(shared(call.id))
            self._call_name.append(shared(call.name))
            self._call_args.append(self._put(call.args))
            if call.problem or call.family:
                self._call_more[row] = (shared(call.problem), shared(call.family))

    def _set_results(self, index: int, results: list[ToolResult]) -> None:
        self._odd_results.pop(index, None)
        first = len(self._result_block)
        if not results:
            self._results[index] = 0
            return
        if not _fit_rows(results, index, first):
            self._odd_results[index] = list(results)
            self._results[index] = 0
            return
        self._results[index] = (first << _COUNT_BITS) | len(results)
        shared = self._put_shared
        for row, result in enumerate(results, first):
            self._result_block.append(result.block)
            self._result_id.append(shared(result.tool_call_id))
            self._result_text.append(self._put(result.text))
            self._result_error.append(result.is_error)
            if result.family:
                self._result_family[row] = shared(result.family)

    # Reading ------------------------------------------------------------------------

    def _calls_of(self, index: int) -> list[ToolCall]:
        packed = self._calls.chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK]
        if not packed:
            odd = self._odd_calls.get(index)
            return Settled(odd) if odd else SETTLED_EMPTY
        first, count = packed >> _COUNT_BITS, packed & _COUNT_MASK
        get, more = self._get, self._call_more
        calls = []
        for row in range(first, first + count):
            call = ToolCall(
                get(self._call_id[row]),
                get(self._call_name[row]),
                index,
                self._call_block[row],
                get(self._call_args[row]),
            )
            if row in more:
                problem, family = more[row]
                call = replace(call, problem=get(problem), family=get(family))
            calls.append(call)
        return Settled(calls)

    def _results_of(self, index: int) -> list[ToolResult]:
        packed = self._results.chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK]
        if not packed:
            odd = self._odd_results.get(index)
            return Settled(odd) if odd else SETTLED_EMPTY
        first, count = packed >> _COUNT_BITS, packed & _COUNT_MASK
        get, family = self._get, self._result_family
        return Settled(
            ToolResult(
                get(self._result_id[row]),
                index,
                self._result_block[row],
                bool(self._result_error[row]),
                get(self._result_text[row]),
                get(family.get(row, _NONE)),
            )
            for row in range(first, first + count)
        )

    # Looking records up by uid ------------------------------------------------------

    def stand_for_last(self, last: bool) -> None:
        """Make a uid several records hold stand for the last of them (`last`) or the first.

        The first by default; the last for a format whose agent indexes its
        records by uid, a later one replacing an earlier (pi, `Format.last_copy`).
        Every lookup by uid (`first_with_uid`, `parent_of`, `path_to`,
        `holding_uid`) then answers with that record.
        """
        if last != self._last_copy:
            self._last_copy = last
            self._uid_slots = None

    def first_with_uid(self, uid: str) -> int | None:
        """Return the index of the record standing for `uid` (see `stand_for_last`), or None.

        That is the first record whose `uid` is `uid`, or the last of them
        after `stand_for_last(True)`. The lookup table is an open-addressing
        hash table of record indexes in one array (6 to 11 bytes a record,
        where a dict of the uid strings costs about 150), built on first use
        and again after a uid changes.
        """
        slots = self._uid_slots
        if slots is None:
            slots = self._uid_slots = self._uid_table()
        mask = len(slots) - 1
        held = hash(uid) & _HASH_MASK
        probe = held & mask
        refs, hashes, get = self._uid, self._uid_hash, self._get
        while True:
            entry = slots[probe]
            if not entry:
                return None
            if hashes[entry - 1] == held and get(refs[entry - 1]) == uid:
                return entry - 1
            probe = (probe + 1) & mask

    def _uid_table(self) -> array[int]:
        """Return the slots of `first_with_uid`: record index + 1 at each uid's hash, 0 free."""
        size = 8
        while size < self._count * 3 // 2:  # at most two thirds full
            size *= 2
        code = "i" if size < 2**31 else "q"  # record indexes + 1 fit 32 bits nearly always
        slots = array(code, [0]) * size
        mask = size - 1
        get, ref_chunks, hash_chunks = self._get, self._uid.chunks, self._uid_hash.chunks
        # 1 for each record with a uid to begin with; a later copy of a uid is cleared.
        first = bytearray(self._count)
        for base, (refs,) in self._chunked(self._uid):
            none = _packed(array(refs.typecode, [_NONE]) * len(refs))
            held = _nonzero(_packed(refs) ^ none, refs.itemsize, len(refs))
            first[base : base + len(refs)] = held.to_bytes(len(refs), "little")
        self._uid_first = first
        last = self._last_copy
        hashes = zip(count(), self._each(self._uid_hash), strict=False)
        # Each record with a uid goes in the slot its hash's probe finds first free, but
        # one whose uid a slot's record already holds (a copy: the first stands for it).
        for index, held in compress(hashes, first):
            probe = held & mask
            entry = slots[probe]
            if not entry:
                slots[probe] = index + 1
                continue
            ref = ref_chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK]
            while entry:
                other = entry - 1
                at, slot = other >> _CHUNK_BITS, other & _CHUNK_MASK
                if hash_chunks[at][slot] == held:
                    known = ref_chunks[at][slot]
                    if known == ref or get(known) == get(ref):
                        if last:  # this later record stands for the uid instead
                            slots[probe] = index + 1
                            first[other] = 0
                        else:  # an earlier record holds this uid: it stands for it
                            first[index] = 0
                        break
                probe = (probe + 1) & mask
                entry = slots[probe]
            else:
                slots[probe] = index + 1
        return slots

    def chained(self) -> bool:
        """Return True when a record's parent is known to name another record's uid.

        Known as the records were appended: one whose parent is the uid of
        the record just before it, and not its own uid, neither record's uid
        nor parent set since. False says nothing (a link elsewhere, say):
        `base.linked` then looks at every record.
        """
        return self._chained >= 0 and not self._replaced

    def _relinked(self, index: int, uid: bool) -> None:
        """Forget what a new uid or parent of record `index` stales, in each store sharing columns.

        That is the uid table (`uid` True: a uid changed), the flags of
        `_links`, and the link `chained` knows.
        """
        for store in [ref() for ref in self._sharing] if self._sharing else [self]:
            if store is None:
                continue
            if uid:
                store._uid_slots = None
            store._linked.clear()
            store._unchain(index)

    def _unchain(self, index: int) -> None:
        """Forget the known link when record `index`'s uid or parent changes and held it."""
        if 0 <= self._chained - index <= 1:
            self._chained = -1

    # Scans in column space -----------------------------------------------------------
    # What a format's `finish` asks of every record, read without a view per record.

    def _each(self, column: _Column) -> Iterator[int]:
        """Yield a per-record column's values, one per record (its own length is not kept)."""
        return islice(chain.from_iterable(column.chunks), self._count)

    def parents_apart(self) -> Iterator[tuple[int, str]]:
        """Yield (index, parent) for each record with a parent, but those known to be held.

        Known: a record whose parent the store keeps as the very string of the
        uid of the record just before it (nearly every record of a chain, as
        read): its parent is held by a record. Every record whose parent is
        not the uid before it is yielded; a few whose parent is, but was set
        since, may be too. So is one whose parent is its own uid, the line
        before holding that uid too (a self-parented line logged twice): the
        whole-file path reads it as one whose parent is no other entry.
        """
        if self._replaced:
            previous: str | None = None
            for record in self:
                named = record.parent
                if named is not None and (named != previous or named == record.uid):
                    yield record.index, named
                previous = record.uid
            return
        # The store shares the previous uid's reference for a parent equal to it, and
        # for a uid equal to it: a record whose parent is its own uid shares both. The
        # test runs on a chunk's values at once (`_nonzero`); only the records kept are read.
        last = _NONE
        for base, (uids, parents) in self._chunked(self._uid, self._parent):
            items, width, code = len(uids), uids.itemsize, uids.typecode
            before = array(code, [last]) + uids[:-1]  # the uid of the record before each
            last = uids[-1]
            refs = _packed(parents)
            given = _nonzero(refs ^ _packed(array(code, [_NONE]) * items), width, items)
            apart = _nonzero(refs ^ _packed(before), width, items)
            other = _nonzero(refs ^ _packed(uids), width, items)  # not the record's own uid
            for index in _indexes(given & (apart | ~other), items, base):
                yield index, self._get(parents[index - base])

    def _chunked(self, *columns: _Column) -> Iterator[tuple[int, list[array[int]]]]:
        """Yield (index of its first record, each column's values) for each chunk of records."""
        for k, chunks in enumerate(zip(*(column.chunks for column in columns), strict=True)):
            base = k << _CHUNK_BITS
            items = min(self._count - base, _CHUNK_MASK + 1)
            if items <= 0:
                return
            yield base, [chunk[:items] if items <= _CHUNK_MASK else chunk for chunk in chunks]

    def roots(self) -> Iterator[int]:
        """Yield the index of each record with a uid and no parent, read in column space."""
        if self._replaced:
            for record in self:
                if record.uid is not None and record.parent is None:
                    yield record.index
            return
        for base, (uids, parents) in self._chunked(self._uid, self._parent):
            items, width = len(uids), uids.itemsize
            none = _packed(array(uids.typecode, [_NONE]) * items)
            held = _nonzero(_packed(uids) ^ none, width, items)
            parented = _nonzero(_packed(parents) ^ none, width, items)
            yield from _indexes(held & ~parented, items, base)

    def with_flag(self, bit: int) -> Iterator[int]:
        """Yield the index of each record whose flag `bit` (`model.Record._bits`) is set."""
        if self._replaced:
            yield from (r.index for r in self if r._bits & bit)
            return
        wide = self._wide_bits
        if bit > _HASH_MASK:  # beyond the column's 32 bits: only a wide value holds it
            yield from sorted(index for index, bits in wide.items() if bits & bit)
            return
        # `_WIDE & bit` is set: a record whose bits are kept wide is looked at again.
        for base, (flags,) in self._chunked(self._bits):
            items = len(flags)
            held = _packed(flags) & _packed(array(flags.typecode, [bit]) * items)
            for index in _indexes(_nonzero(held, flags.itemsize, items), items, base):
                if index not in wide or wide[index] & bit:
                    yield index

    def answer_lines(self, skip: bytearray, bit: int, flagged: bool = False) -> Iterator[int]:
        """Yield each record not flagged in `skip` holding results and no calls, `bit` unset.

        `skip[i]` is nonzero for a record to leave out; `bit` a flag of
        `model.Record._bits` (the sidechain flag, say); `flagged` True yields
        the records with `bit` set instead.
        """
        if self._replaced:
            for r in self:
                if skip[r.index] or not r.results or r.calls:
                    continue
                if bool(r._bits & bit) == flagged:
                    yield r.index
            return
        odd_results, odd_calls, wide = self._odd_results, self._odd_calls, self._wide_bits
        if odd_results or odd_calls:
            results_of, calls_of = self._each(self._results), self._each(self._calls)
            columns = zip(results_of, calls_of, self._each(self._bits), strict=True)
            for index, (results, calls, bits) in enumerate(columns):
                if skip[index] or not (results or odd_results.get(index)):
                    continue
                if calls or odd_calls.get(index):
                    continue
                if bool((bits if bits != _WIDE else wide[index]) & bit) == flagged:
                    yield index
            return
        # Every record's calls and results are in rows: the records holding results and
        # no calls, not skipped, are found over whole columns; only their bits are read.
        for base, (answers, asks, flags) in self._chunked(self._results, self._calls, self._bits):
            items, width = len(answers), answers.itemsize
            answering = _nonzero(_packed(answers), width, items)
            calling = _nonzero(_packed(asks), width, items)
            skipped = int.from_bytes(skip[base : base + items].translate(_TRUTH), "little")
            for index in _indexes(answering & ~calling & ~skipped, items, base):
                bits = flags[index - base]
                if bool((bits if bits != _WIDE else wide[index]) & bit) == flagged:
                    yield index

    def holding_results(self, indexes: Iterable[int]) -> Iterator[int]:
        """Yield each of `indexes` whose record holds tool results, in their order."""
        if self._replaced:
            yield from (i for i in indexes if self[i].results)
            return
        chunks, odd = self._results.chunks, self._odd_results
        for index in indexes:
            if chunks[index >> _CHUNK_BITS][index & _CHUNK_MASK] or index in odd:
                yield index

    def result_ids(self) -> Iterator[str]:
        """Yield the tool call id of every result, record by record."""
        return (tool_call_id for _, tool_call_id in self.result_rows())

    def result_rows(self) -> Iterator[tuple[int, str]]:
        """Yield (record index, tool call id) of every result, record by record."""
        return self._rows(self._results, self._result_id, self._odd_results, "results")

    def call_rows(self) -> Iterator[tuple[int, str]]:
        """Yield (record index, call id) of every tool call, record by record."""
        return self._rows(self._calls, self._call_id, self._odd_calls, "calls")

    def _rows(
        self, packs: _Column, ids: _Column, odd: dict[int, Any], field: str
    ) -> Iterator[tuple[int, str]]:
        if self._replaced:
            for record in self:
                for item in getattr(record, field):
                    yield record.index, item.id if field == "calls" else item.tool_call_id
            return
        get, chunks = self._get, ids.chunks
        if odd:
            held: Iterable[tuple[int, int]] = enumerate(self._each(packs))
        else:  # only the records holding rows, found by C iterators
            rows = filter(None, self._each(packs))
            held = zip(compress(count(), self._each(packs)), rows, strict=True)
        arena = self._arena
        for index, packed in held:
            if packed:
                first = packed >> _COUNT_BITS
                for row in range(first, first + (packed & _COUNT_MASK)):
                    ref = chunks[row >> _CHUNK_BITS][row & _CHUNK_MASK]
                    size = ref & _LENGTH_MASK
                    if ref <= 0 or size == _UUID:
                        yield index, get(ref)
                        continue
                    # `_get` written out for a string in the arena: each id is read once,
                    # so the cache of strings read lately would only be filled and cleared.
                    at = (ref >> _LENGTH_BITS) & (_ARENA_CHUNK - 1)
                    text = arena[ref >> (_LENGTH_BITS + _ARENA_BITS)][at : at + size]
                    yield index, text.decode("utf-8", "surrogatepass")
            elif index in odd:
                for item in odd[index]:
                    yield index, item.id if field == "calls" else item.tool_call_id

    def pairing_rows(self, indexes: Iterable[int]) -> list[PairingRow] | None:
        """Return what pairing reads of each of `indexes`, read in column space, or None.

        Each row is (role, `Record._bits`, message id,
        calls as (block, id, name), results as (block, tool call id, text)),
        in the order of `indexes`. None when some record is not plain enough for
        rows alone: the store has replaced records, or one of `indexes` keeps
        its calls or results as a list, or a call has a problem or a family,
        or a result a family (the caller reads the views instead).
        """
        if self._replaced:
            return None
        more, families = self._call_more, self._result_family
        kinds, bits_of, messages = self._kind.chunks, self._bits.chunks, self._message.chunks
        call_packs, result_packs = self._calls.chunks, self._results.chunks
        call_block, call_id = self._call_block.chunks, self._call_id.chunks
        call_name = self._call_name.chunks
        result_block, result_id = self._result_block.chunks, self._result_id.chunks
        result_text = self._result_text.chunks
        odd_calls, odd_results, wide = self._odd_calls, self._odd_results, self._wide_bits
        get, roles = self._get, _ROLES
        strings: dict[int, str] = {_NONE: ""}  # reference -> string: ids and names recur

        def text(ref: int) -> str:
            found = strings.get(ref)
            if found is None:
                found = strings[ref] = get(ref)
            return found

        rows: list[PairingRow] = []
        for index in indexes:
            chunk, slot = index >> _CHUNK_BITS, index & _CHUNK_MASK
            bits = bits_of[chunk][slot]
            if bits == _WIDE:
                bits = wide[index]
            ref = messages[chunk][slot]
            message = None if ref == _NONE else text(ref)
            calls: Sequence[tuple[int, str, str]] = ()
            packed = call_packs[chunk][slot]
            if packed:
                calls = []
                first = packed >> _COUNT_BITS
                for row in range(first, first + (packed & _COUNT_MASK)):
                    if more and row in more:
                        return None
                    at, off = row >> _CHUNK_BITS, row & _CHUNK_MASK
                    ident, name = text(call_id[at][off]), text(call_name[at][off])
                    calls.append((call_block[at][off], ident, name))
            elif index in odd_calls:
                return None
            results: Sequence[tuple[int, str, str]] = ()
            packed = result_packs[chunk][slot]
            if packed:
                results = []
                first = packed >> _COUNT_BITS
                for row in range(first, first + (packed & _COUNT_MASK)):
                    if families and row in families:
                        return None
                    at, off = row >> _CHUNK_BITS, row & _CHUNK_MASK
                    ident, text_ref = text(result_id[at][off]), result_text[at][off]
                    said = "" if text_ref in (_NONE, _BLANK) else get(text_ref)
                    results.append((result_block[at][off], ident, said))
            elif index in odd_results:
                return None
            rows.append((roles[kinds[chunk][slot] & _ROLE_MASK], bits, message, calls, results))
        return rows

    def with_rare(self, name: str) -> set[int]:
        """Return the indexes of the records whose rare field `name` is set (not its default).

        `name` is a key of `model._RARE_DEFAULTS`. Read from the store's rare
        fields, not a view per record.
        """
        if self._replaced:
            default = _RARE_DEFAULTS[name]
            return {r.index for r in self if getattr(r, name) != default}
        return {index for index, rare in self._rare.items() if name in rare}

    def with_call_problems(self) -> Iterator[int]:
        """Yield the index of each record with a call whose `problem` is set."""
        if self._replaced:
            yield from (r.index for r in self if any(c.problem for c in r.calls))
            return
        more, odd = self._call_more, self._odd_calls
        if not more and not odd:
            return
        for index, packed in enumerate(self._each(self._calls)):
            if packed:
                first = packed >> _COUNT_BITS
                rows = range(first, first + (packed & _COUNT_MASK))
                if more and any(more.get(row, (_NONE,))[0] != _NONE for row in rows):
                    yield index
            elif index in odd and any(call.problem for call in odd[index]):
                yield index

    def context_marks(self) -> tuple[set[int], dict[int, str]] | None:
        """Return (indexes of compaction boundaries, {index: keep_from}), or None: not here.

        Read from the columns and the rare fields, for `branch.live_context`;
        None for a store with replaced records (the caller reads the views).
        """
        if self._replaced:
            return None
        keeps = {i: rare["keep_from"] for i, rare in self._rare.items() if "keep_from" in rare}
        return set(self.with_flag(_BOUNDARY)), {i: k for i, k in keeps.items() if k is not None}

    def holding_uid(self, uid: str) -> set[int]:
        """Return the indexes of every record whose `uid` is `uid`.

        The one standing for it is the uid table's; the others are among the
        records that do not stand for their uid, which the table marks.
        """
        first = self.first_with_uid(uid)
        if first is None:
            return set()
        held = {first}
        marks, refs, get = self._uid_first, self._uid, self._get
        index = marks.find(0)
        while index >= 0:
            ref = refs[index]
            if ref != _NONE and get(ref) == uid:
                held.add(index)
            index = marks.find(0, index + 1)
        return held

    def holding_uids(self, uids: Iterable[str]) -> dict[int, str]:
        """Return {index: uid} of every record whose `uid` is one of `uids`.

        As `holding_uid` for each, in one walk over the records that do not
        stand for their uid, however many `uids` there are.
        """
        wanted = set(uids)
        held = {first: uid for uid in wanted if (first := self.first_with_uid(uid)) is not None}
        if not held:
            return held
        marks, refs, get = self._uid_first, self._uid, self._get
        index = marks.find(0)
        while index >= 0:
            ref = refs[index]
            if ref != _NONE and (uid := get(ref)) in wanted:
                held[index] = uid
            index = marks.find(0, index + 1)
        return held

    def parent_of(self, index: int) -> int | None:
        """Return the index of the record standing for record `index`'s parent, or None.

        `first_with_uid(self[index].parent)`, but a parent kept as the very
        uid string of the record just before it, that record standing for
        it, is found without reading a string (as `path_to` follows it).
        """
        if self._replaced:
            parent = self[index].parent
            return None if parent is None else self.first_with_uid(parent)
        if self._links()[index]:
            return index - 1
        ref = self._parent[index]
        if ref == _NONE:
            return None
        return self.first_with_uid(self._get(ref))

    def unlinked(self, path: Sequence[int]) -> Iterator[int]:
        """Yield each record of `path` but its first whose parent is not the record before it.

        The parent's record is the one `parent_of` finds. A record that follows
        the one before it in the file and hangs from it (`_links`) is passed
        over without reading its parent.
        """
        if self._replaced:
            for k in range(1, len(path)):
                if self.parent_of(path[k]) != path[k - 1]:
                    yield path[k]
            return
        links = self._links()
        code = "q"  # path holds indexes, never negative: adding 1 carries into no other item
        for start in range(1, len(path), _CHUNK_MASK + 1):
            after = array(code, path[start : start + _CHUNK_MASK + 1])
            items = len(after)
            before = _packed(array(code, path[start - 1 : start - 1 + items]))
            plus_one = before + _packed(array(code, [1]) * items)
            apart = _nonzero(_packed(after) ^ plus_one, after.itemsize, items)
            unlinked = bytes(itemgetter(*after)(links) if items > 1 else [links[after[0]]])
            unlinked = unlinked.translate(_FALSITY)
            for k in _indexes(apart | int.from_bytes(unlinked, "little"), items, start):
                index = path[k]
                if self.parent_of(index) != path[k - 1]:
                    yield index

    def plain_lines(self, indexes: Iterable[int]) -> Iterator[tuple[int, bytes | None]]:
        """Yield (index, its line's bytes) for each of `indexes`; None for a record read otherwise.

        Otherwise: a record with a parsed value or an `error`, whose JSON is not
        its line as read (see `Record.obj`), or a store with no source. Read
        from the columns, without a view of each record.
        """
        source, parsed, rare = self.source, self._parsed, self._rare
        starts, sizes, wide = self._start.chunks, self._size.chunks, self._wide_size
        for index in indexes:
            if self._replaced and index in self._replaced:
                record = self._replaced[index]
                plain = record.parsed is None and record.source is not None and not record.error
                yield index, record.source[record.start : record.end] if plain else None
                continue
            odd = source is None or index in parsed or (index in rare and rare[index].get("error"))
            if odd:
                yield index, None
                continue
            at, slot = index >> _CHUNK_BITS, index & _CHUNK_MASK
            start, size = starts[at][slot], sizes[at][slot]
            yield index, source[start : start + (size if size != _WIDE else wide[index])]

    def with_error(self) -> list[int]:
        """Return the indexes of the records whose `error` is set, in order."""
        if self._replaced:
            return [record.index for record in self if record.error is not None]
        return sorted(i for i, rare in self._rare.items() if rare.get("error") is not None)

    def path_to(self, uid: str | None) -> array[int] | None:
        """Return `branch._path_to`'s path to the record standing for `uid`, or None: not here.

        Root first, following parent links (a parent's record is the one
        standing for its uid, `first_with_uid`), stopping at a record seen
        before. A parent that is the record before's very uid string, that
        record standing for it, is
        followed without reading a string. None for a store with replaced
        records (the caller walks the views). An array of 64-bit indexes (8
        bytes a record, where a list costs about 36).
        """
        if self._replaced:
            return None
        links, parents = self._links(), self._parent
        path: array[int] = array("q")
        seen = bytearray(self._count)
        current = self.first_with_uid(uid) if uid else None
        while current is not None and not seen[current]:
            # Records `low` to `current` each hang from the one before (`_links`): a run
            # walked at once, up to a record seen before, if one is in it.
            low = links.rfind(0, 0, current + 1)
            stop = seen.rfind(1, low, current + 1)
            if stop >= 0:
                path.extend(range(current, stop, -1))
                break
            path.extend(range(current, low - 1, -1))
            seen[low : current + 1] = b"\x01" * (current + 1 - low)
            ref = parents[low]
            if ref == _NONE:
                break
            current = self.first_with_uid(self._get(ref))
        path.reverse()
        return path

    def _links(self) -> bytearray:
        """Return a flag per record: 1 when its parent is held by the record just before it.

        That is, the store keeps its parent as the very reference of that
        record's uid, which that record stands for (`first_with_uid`). Made
        from whole columns, again after a uid or a parent changes.
        """
        if self._uid_slots is None:
            self._uid_slots = self._uid_table()
        first = self._uid_first
        if self._linked and self._linked[0][0] is first:
            return self._linked[0][1]
        links, last = bytearray(self._count), _NONE
        for base, (uids, parents) in self._chunked(self._uid, self._parent):
            items, width = len(uids), uids.itemsize
            before = array(uids.typecode, [last]) + uids[:-1]
            last = uids[-1]
            other = _nonzero(_packed(parents) ^ _packed(before), width, items)
            # 1 where the record before stands for its uid (none before the first record).
            standing = first[base - 1 : base + items - 1] if base else b"\x00" + first[: items - 1]
            stands = int.from_bytes(standing, "little")
            links[base : base + items] = (stands & ~other).to_bytes(items, "little")
        self._linked[:] = [(first, links)]
        return links

    def replaced(self, records: dict[int, Record]) -> RecordStore:
        """Return a store that reads as this one but for `records` ({index: Record}).

        The two share their columns, so that the copy costs nothing per
        record: it is for reading (a repair renders renamed records so), and
        a record changed through either shows in both.
        """
        if self._sharing is None:
            self._sharing = [weakref.ref(self)]
        self._sharing[:] = [ref for ref in self._sharing if ref() is not None]  # copies gone
        other = RecordStore.__new__(RecordStore)
        other.__dict__.update(self.__dict__)
        other._replaced = {**self._replaced, **records}
        self._sharing.append(weakref.ref(other))
        return other

    def _view(self, index: int) -> Record:
        replaced = self._replaced
        return replaced[index] if replaced and index in replaced else StoredRecord(self, index)

    # The list interface ---------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return bool(self._count)

    @overload
    def __getitem__(self, where: SupportsIndex, /) -> Record: ...

    @overload
    def __getitem__(self, where: slice, /) -> list[Record]: ...

    def __getitem__(self, where: SupportsIndex | slice, /) -> Record | list[Record]:
        if isinstance(where, slice):
            return [self._view(i) for i in range(*where.indices(len(self)))]
        size = self._count
        if where.__class__ is int and 0 <= where < size:
            if self._replaced and where in self._replaced:
                return self._replaced[where]
            return StoredRecord(self, where)
        index = where.__index__()
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("record index out of range")
        return self._view(index)

    def __iter__(self) -> Iterator[Record]:
        view = self._view
        for index in range(self._count):
            yield view(index)

    def __reversed__(self) -> Iterator[Record]:
        view = self._view
        for index in range(self._count - 1, -1, -1):
            yield view(index)

    def __contains__(self, value: object) -> bool:
        return any(record == value for record in self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return f"<RecordStore of {len(self)} records>"

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a RecordStore only grows by append")

    insert = remove = pop = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**62) -> int:
        """Return the index of the first record equal to `value`; raise ValueError if none."""
        for index in range(start.__index__(), min(stop.__index__(), len(self))):
            if self[index] == value:
                return index
        raise ValueError("record not in store")

    def count(self, value: Any) -> int:
        """Return how many records equal `value`."""
        return sum(record == value for record in self)


class StoredRecord(Record):
    """Record `_i` of a RecordStore: every attribute reads and writes the store's columns.

    Views are made on each access and compare equal when their fields do;
    two views of one record share everything but identity. `calls` and
    `results` are copies: assign a new list to change them.
    """

    __slots__ = ("_store", "_i")
    _store: RecordStore
    _i: int

    def __init__(self, store: RecordStore, index: int) -> None:  # noqa: D107
        self._store = store
        self._i = index

    @property
    def _at(self) -> int:  # type: ignore[override]
        store, i = self._store, self._i
        # The packing Record._at documents: index, line, start, end.
        return (((i << 32) | store._line[i]) << 80) | (store._start[i] << 40) | store._end_of(i)

    @property
    def index(self) -> int:
        return self._i

    @property
    def start(self) -> int:
        return self._store._start[self._i]

    @property
    def end(self) -> int:
        return self._store._end_of(self._i)

    @property
    def line(self) -> int:
        return self._store._line[self._i]

    @property
    def role(self) -> Role:
        i = self._i
        return _ROLES[self._store._kind.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK] & _ROLE_MASK]

    @role.setter
    def role(self, value: Role) -> None:
        self._store._set_kind(self._i, self.kind, value)

    @property
    def kind(self) -> str:
        store, i = self._store, self._i
        return store._kinds[store._kind.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK] >> _ROLE_BITS]

    @kind.setter
    def kind(self, value: str) -> None:
        self._store._set_kind(self._i, value, self.role)

    @property
    def _bits(self) -> int:
        return self._store._bits_of(self._i)

    @_bits.setter
    def _bits(self, value: int) -> None:
        self._store._set_bits(self._i, value)

    def _flag(self, bit: int) -> bool:
        i = self._i
        bits = self._store._bits.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK]
        return bool((bits if bits != _WIDE else self._store._wide_bits[i]) & bit)

    @property
    def _rare(self) -> dict[str, Any] | None:
        return self._store._rare.get(self._i)

    @_rare.setter
    def _rare(self, value: dict[str, Any] | None) -> None:
        if value:
            self._store._rare[self._i] = value
        else:
            self._store._rare.pop(self._i, None)

    def _set_rare(self, name: str, value: Any) -> None:
        rare = self._store._rare
        if value == _RARE_DEFAULTS[name]:
            own = rare.get(self._i)
            if own is not None:
                own.pop(name, None)
                if not own:
                    del rare[self._i]
            return
        rare.setdefault(self._i, {})[name] = value

    @property
    def parsed(self) -> Any:
        return self._store._parsed.get(self._i)

    @parsed.setter
    def parsed(self, value: Any) -> None:
        if value is None:
            self._store._parsed.pop(self._i, None)
        else:
            self._store._parsed[self._i] = value

    @property
    def source(self) -> Any:
        return self._store.source

    @source.setter
    def source(self, value: Any) -> None:
        if value is not self._store.source:
            raise TypeError("a stored record reads from its store's source")

    @property
    def calls(self) -> list[ToolCall]:
        return self._store._calls_of(self._i)

    @calls.setter
    def calls(self, value: list[ToolCall]) -> None:
        self._store._set_calls(self._i, value)

    @property
    def results(self) -> list[ToolResult]:
        return self._store._results_of(self._i)

    @results.setter
    def results(self, value: list[ToolResult]) -> None:
        self._store._set_results(self._i, value)

    @property
    def text(self) -> str:
        store, i = self._store, self._i
        return store._get(store._text.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK])  # type: ignore[no-any-return]

    @text.setter
    def text(self, value: str) -> None:
        self._store._text[self._i] = self._store._put(value)

    @property
    def uid(self) -> str | None:
        store, i = self._store, self._i
        return store._get(store._uid.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK], None)  # type: ignore[no-any-return]

    @uid.setter
    def uid(self, value: str | None) -> None:
        store = self._store
        parent = store._parent[self._i]
        # A uid equal to the record's parent shares its reference, as one read so does:
        # `parents_apart` tells a record parented on its own uid by the references alone.
        shared = value is not None and parent != _NONE and store._get(parent) == value
        store._uid[self._i] = parent if shared else store._put(value)
        store._uid_hash[self._i] = 0 if value is None else hash(value) & _HASH_MASK
        store._relinked(self._i, True)

    @property
    def parent(self) -> str | None:
        store, i = self._store, self._i
        return store._get(store._parent.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK], None)  # type: ignore[no-any-return]

    @parent.setter
    def parent(self, value: str | None) -> None:
        self._store._parent[self._i] = self._store._put(value)
        self._store._relinked(self._i, False)

    @property
    def message_id(self) -> str | None:
        store, i = self._store, self._i
        return store._get(store._message.chunks[i >> _CHUNK_BITS][i & _CHUNK_MASK], None)  # type: ignore[no-any-return]

    @message_id.setter
    def message_id(self, value: str | None) -> None:
        self._store._message[self._i] = self._store._put(value)
