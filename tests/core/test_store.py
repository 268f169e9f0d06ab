"""A RecordStore reads back every field of the records put in it, and keeps what views write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from transcripts import formats
from transcripts.core.model import _SIDECHAIN, Record, Role, ToolCall, ToolResult
from transcripts.core.store import _ARENA_CHUNK, RecordStore
from transcripts.engine import FileSource
from transcripts.formats.base import linked

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
LINES = sorted(
    p for p in [*SAMPLES.glob("formats/*.jsonl"), *SAMPLES.glob("cases/*.jsonl")] if p.is_file()
)
FIELDS = [
    *("index", "start", "end", "line", "role", "kind", "calls", "results", "other_blocks"),
    *("text", "uid", "parent", "message_id", "timestamp", "boundary", "keep_from"),
    *("sidechain", "aborted", "interrupted", "inactive", "leads", "attached"),
    *("relinked_from", "error", "obj"),
]


def _fields(record: Record, *, obj: bool = True) -> dict[str, object]:
    """Return the record's public fields; `obj` False leaves out its JSON (read from the file)."""
    return {name: getattr(record, name) for name in FIELDS if obj or name != "obj"}


def _stored(records: list[Record], source: bytes) -> RecordStore:
    store = RecordStore(source)
    store.extend(records)
    return store


@pytest.mark.parametrize("path", LINES, ids=lambda p: p.name)
def test_it_reads_back_every_field_of_each_sample_record(path: Path) -> None:
    data = path.read_bytes()
    records = formats.load(data, path.name).records
    store = _stored(records, data)
    assert len(store) == len(records)
    for record, view in zip(records, store, strict=True):
        assert _fields(view) == _fields(record)


@pytest.mark.parametrize("path", LINES, ids=lambda p: p.name)
def test_a_streamed_file_holds_its_records_in_a_store_that_reads_as_in_memory(
    path: Path,
) -> None:
    in_memory = formats.load(path.read_bytes(), path.name).records
    with FileSource(path) as source:
        streamed = formats.load(source, path.name).records
        assert isinstance(streamed, RecordStore)
        assert [_fields(r) for r in streamed] == [_fields(r) for r in in_memory]


def test_without_summaries_equal_arguments_keep_equal_digests(tmp_path: Path) -> None:
    path = SAMPLES / "formats" / "claude_code.jsonl"
    with FileSource(path) as source:
        calls = [
            c for r in formats.load(source, path.name, summaries=False).records for c in r.calls
        ]
    whole = [c for r in formats.load(path.read_bytes(), path.name).records for c in r.calls]
    assert calls and all(c.args.startswith("#") and len(c.args) == 13 for c in calls)
    for a, b in zip(calls, calls[1:], strict=False):
        full_a, full_b = (next(w.args for w in whole if w.id == c.id) for c in (a, b))
        assert (a.args == b.args) == (full_a == full_b)


def _record(index: int, **values: Any) -> Record:
    return Record(index, 10 * index, 10 * index + 5, Role.USER, "user", **values)


def test_a_view_writes_through_to_the_store() -> None:
    store = _stored([_record(0), _record(1, uid="b", parent="a")], b"x" * 100)
    view = store[1]
    view.uid, view.parent, view.kind, view.role = "B", None, "assistant", Role.ASSISTANT
    view.inactive, view.other_blocks, view.timestamp = True, 3, "2025-01-01T00:00:00Z"
    view.calls = [ToolCall("call_1", "Bash", 1, 0, '{"a":1}')]
    again = store[1]
    assert (again.uid, again.parent, again.kind, again.role) == (
        "B",
        None,
        "assistant",
        Role.ASSISTANT,
    )
    assert (again.inactive, again.other_blocks, again.timestamp) == (
        True,
        3,
        "2025-01-01T00:00:00Z",
    )
    assert again.calls == [ToolCall("call_1", "Bash", 1, 0, '{"a":1}')]
    view.timestamp = None
    assert store[1].timestamp is None and store[1]._rare is None
    with pytest.raises(TypeError):
        again.calls.append(ToolCall("call_2", "Bash", 1, 1))
    assert store[0].uid is None and not store[0].inactive


def test_odd_values_read_back_exactly() -> None:
    calls = [ToolCall(f"c{k}", "Read", 2, k, "{}") for k in range(70)]  # more than a row packs
    records = [
        # A UUID spelled in capitals is not the canonical form kept in 16 bytes.
        _record(0, uid="3FA28A29-7A6F-41DB-B4C1-4C7CFA1EF371", parent=None),
        _record(1, uid="3fa28a29-7a6f-41db-b4c1-4c7cfa1ef371", text="é" * _ARENA_CHUNK),
        _record(2, calls=calls, message_id="msg \x00 \ud800"),
        # A result listed under another record's index is kept as given.
        _record(3, results=[ToolResult("c1", 2, 0, True, "done", "custom")]),
        Record(4, 0, 1 << 39, Role.META, "", other_blocks=1 << 40, line=7),
    ]
    store = _stored(records, b"")
    assert [_fields(v, obj=False) for v in store] == [_fields(r, obj=False) for r in records]


def test_it_finds_the_first_record_of_a_uid() -> None:
    store = _stored([_record(0, uid="a"), _record(1, uid="b"), _record(2, uid="a")], b"")
    assert [store.first_with_uid(u) for u in ("a", "b", "c")] == [0, 1, None]
    store[0].uid = "z"
    assert (store.first_with_uid("a"), store.first_with_uid("z")) == (2, 0)


def test_it_reads_as_a_list_of_records() -> None:
    records = [_record(k, uid=str(k)) for k in range(5)]
    store = _stored(records, b"")
    assert [_fields(r, obj=False) for r in store] == [_fields(r, obj=False) for r in records]
    assert store == list(store) and bool(store) and not RecordStore(b"")
    assert [r.index for r in reversed(store)] == [4, 3, 2, 1, 0]
    assert [r.index for r in store[1:4]] == [1, 2, 3] and store[-1].index == 4
    assert store.index(store[3]) == 3 and store[2] in store
    with pytest.raises(IndexError):
        store[5]
    with pytest.raises(TypeError):
        store.insert(0, records[0])
    with pytest.raises(ValueError, match="appended at 5"):
        store.append(_record(7))


def test_a_replaced_copy_reads_its_records_and_leaves_the_store_as_it_was() -> None:
    store = _stored([_record(k, uid=str(k)) for k in range(4)], b"")
    other = _record(2, uid="renamed")
    copy = store.replaced({2: other})
    assert copy[2] is other and list(copy)[2] is other and list(reversed(copy))[1] is other
    assert copy[1:3][1] is other and [r.uid for r in copy] == ["0", "1", "renamed", "3"]
    assert [r.uid for r in store] == ["0", "1", "2", "3"] and len(copy) == len(store)


def _scans(records: list[Record]) -> tuple[list[tuple[int, str]], list[str], list[int]]:
    """Return what the store's column scans give, found from the records one by one."""
    apart = []
    previous: str | None = None
    for record in records:
        if record.parent is not None and record.parent != previous:
            apart.append((record.index, record.parent))
        previous = record.uid
    ids = [result.tool_call_id for record in records for result in record.results]
    problems = [r.index for r in records if any(c.problem for c in r.calls)]
    return apart, ids, problems


def _rows(records: list[Record]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    calls = [(r.index, c.id) for r in records for c in r.calls]
    return calls, [(r.index, res.tool_call_id) for r in records for res in r.results]


def _flagged(records: list[Record]) -> tuple[list[int], list[int], list[int]]:
    """Return what `with_flag` and `answer_lines` (both ways) give, found record by record."""
    skip = bytearray(len(records))
    skip[0] = 1
    sidechain = [r.index for r in records if r.sidechain]
    lines = [r.index for r in records if not skip[r.index] and r.results and not r.calls]
    main = [i for i in lines if not records[i].sidechain]
    return sidechain, main, [i for i in lines if records[i].sidechain]


def _store_flagged(store: RecordStore) -> tuple[list[int], list[int], list[int]]:
    skip = bytearray(len(store))
    skip[0] = 1
    return (
        list(store.with_flag(_SIDECHAIN)),
        list(store.answer_lines(skip, _SIDECHAIN)),
        list(store.answer_lines(skip, _SIDECHAIN, flagged=True)),
    )


def _store_scans(store: RecordStore) -> tuple[list[tuple[int, str]], list[str], list[int]]:
    """Return the store's column scans, with each parent it yields that is the uid before left out.

    Such a parent is one the scan could not tell from its references (it was set since).
    """
    apart = [
        (index, parent)
        for index, parent in store.parents_apart()
        if not index or parent != store[index - 1].uid
    ]
    return apart, list(store.result_ids()), list(store.with_call_problems())


def test_its_column_scans_give_what_the_records_say() -> None:
    odd = [ToolCall(f"c{k}", "Read", 4, k, "{}", "bad" if k == 69 else "") for k in range(70)]
    records = [
        _record(0, uid="a", parent="z"),
        _record(1, uid="b", parent="a", calls=[ToolCall("c1", "Bash", 1, 0, "", "no args")]),
        _record(2, uid="c", parent="a", results=[ToolResult("c1", 2, 0, False, "")]),
        _record(3, uid="d", parent="c", calls=[ToolCall("c2", "Bash", 3, 0, "{}")]),
        _record(4, uid="e", parent=None, calls=odd),
        _record(5, results=[ToolResult("c9", 2, 0, True, "x")]),  # another record's: kept odd
    ]
    store = _stored(records, b"")
    assert _store_scans(store) == _scans(records)
    assert (list(store.call_rows()), list(store.result_rows())) == _rows(records)
    store[5].sidechain = True
    store[2].other_blocks = 1 << 40  # flags in a wide value
    store[2].sidechain = True
    assert _store_flagged(store) == _flagged(list(store)) == ([2, 5], [], [2, 5])
    store[2].sidechain = False
    assert _store_flagged(store) == _flagged(list(store)) == ([5], [2], [5])
    assert list(store.parents_apart()) == [(0, "z"), (2, "a")]  # as read: nothing more
    # Changed through views, the scans follow: a parent re-set, a uid changed, results replaced.
    store[3].parent = "c"  # the same text, now a string of its own: yielded, and held
    store[1].uid = "B"  # record 2's parent is no longer the uid before it
    store[2].results = [ToolResult("c3", 2, 0, False, ""), ToolResult("c4", 2, 1, False, "")]
    store[1].calls = [ToolCall("c1", "Bash", 1, 0, "{}")]
    assert _store_scans(store) == _scans(list(store))
    assert (list(store.call_rows()), list(store.result_rows())) == _rows(list(store))
    copy = store.replaced({3: _record(3, uid="d", parent="q")})
    assert _store_scans(copy) == _scans(list(copy))
    assert (list(copy.call_rows()), list(copy.result_rows())) == _rows(list(copy))
    assert _store_flagged(copy) == _flagged(list(copy))


@pytest.mark.parametrize("path", LINES, ids=lambda p: p.name)
def test_its_column_scans_of_each_sample_give_what_its_records_say(path: Path) -> None:
    with FileSource(path) as source:
        records = formats.load(source, path.name, summaries=False).records
        if isinstance(records, RecordStore):
            assert _store_scans(records) == _scans(list(records))
            assert (list(records.call_rows()), list(records.result_rows())) == _rows(records)
            assert _store_flagged(records) == _flagged(records)


def _walk(records: list[Record], uid: str | None) -> list[int]:
    """Return the path `branch._path_to` walks by views: parents by their first record."""
    first: dict[str, int] = {}
    for r in records:
        if r.uid is not None:
            first.setdefault(r.uid, r.index)
    path: list[int] = []
    current = first.get(uid) if uid else None
    while current is not None and current not in path:
        path.append(current)
        parent = records[current].parent
        current = first.get(parent) if parent is not None else None
    return path[::-1]


def test_its_path_walk_follows_parents_to_their_first_records() -> None:
    records = [
        _record(0, uid="a"),
        _record(1, uid="b", parent="a"),
        _record(2, uid="b", parent="b"),  # a second write of b: its parent is b's first
        _record(3, uid="c", parent="b"),  # the uid just before it, but not that uid's first
        _record(4, uid="d", parent="c"),
        _record(5, uid="e", parent="x"),  # a parent no record holds
        _record(6, uid="f", parent="g"),
        _record(7, uid="g", parent="f"),  # a cycle
    ]
    store = _stored(records, b"")
    for uid in ("a", "b", "c", "d", "e", "f", "g", "x", None):
        assert _path_of(store, uid) == _walk(records, uid)
    assert _path_of(store, "d") == [0, 1, 3, 4]
    store[4].parent = "a"  # changed through a view
    store[1].uid = "z"
    assert _path_of(store, "d") == _walk(list(store), "d") == [0, 4]
    assert store.replaced({4: _record(4, uid="d", parent="c")}).path_to("d") is None


@pytest.mark.parametrize("path", LINES, ids=lambda p: p.name)
def test_its_path_walk_of_each_sample_is_the_views_walk(path: Path) -> None:
    with FileSource(path) as source:
        records = formats.load(source, path.name, summaries=False).records
        if isinstance(records, RecordStore):
            for record in records:
                assert _path_of(records, record.uid) == _walk(records, record.uid)


NEAR_UUIDS = [
    "12c1d979-6d20-4479-899c-a2a7420baba4",  # canonical: kept as its 16 bytes
    "12C1D979-6D20-4479-899C-A2A7420BABA4",
    "12c1d979-6d20-4479-899c-a2a7420bab a",
    "12c1d979-6d20-4479-899c-a2a7420b-ba4",
    "12c1d979-6d20-4479-899c-a2a7420bab\u0664a",
    "-" * 36,
    "12c1d979 6d20 4479 899c a2a7420baba4",
    "12c1d9796d204479899ca2a7420baba4",
]


@pytest.mark.parametrize("uid", NEAR_UUIDS)
def test_a_uid_that_is_nearly_a_uuid_reads_back_as_written(uid: str) -> None:
    store = RecordStore(b"{}\n" * 3)
    store.append_message(0, 2, 1, "user", Role.USER, 0, uid, None, None, (), ())
    store.append_message(3, 5, 2, "user", Role.USER, 0, "other", uid, None, (), ())
    assert (store[0].uid, store[1].parent) == (uid, uid)
    assert store.first_with_uid(uid) == 0


def test_it_knows_as_it_appends_that_a_parent_names_the_uid_before_it() -> None:
    store = _stored([_record(0, uid="a"), _record(1, uid="b", parent="a")], b"")
    assert store.chained() and linked(store)
    # Setting the parent that was the proof: known no more, and the scan answers.
    store[1].parent = "z"
    assert not store.chained() and not linked(store)
    store[1].parent = "a"
    assert linked(store)


def test_a_parent_that_is_its_own_uid_is_no_link() -> None:
    store = _stored([_record(0, uid="a"), _record(1, uid="a", parent="a")], b"")
    assert not store.chained() and not linked(store)


def test_a_link_to_a_record_further_back_is_found_by_the_scan() -> None:
    store = _stored([_record(0, uid="a"), _record(1, uid="b"), _record(2, parent="a")], b"")
    assert not store.chained() and linked(store)


def test_its_uid_table_finds_the_first_record_of_each_of_many_uids() -> None:
    uids = [f"u{k % 3000}" for k in range(4500)]  # the last 1500 repeat the first ones
    store = _stored([_record(k, uid=uid) for k, uid in enumerate(uids)], b"")
    assert [store.first_with_uid(f"u{k}") for k in range(3000)] == list(range(3000))
    assert store.first_with_uid("u3000") is None
    store[4000].uid = "new"
    assert (store.first_with_uid("new"), store.first_with_uid("u1000")) == (4000, 1000)


def test_the_parent_of_a_record_is_the_first_record_of_its_parent_uid() -> None:
    records = [
        _record(0, uid="a"),
        _record(1, uid="b", parent="a"),
        _record(2, uid="a"),  # a second record of uid "a": parents name the first
        _record(3, uid="c", parent="a"),
        _record(4, parent="gone"),
        _record(5),
    ]
    store = _stored(records, b"")
    assert [store.parent_of(k) for k in range(6)] == [None, 0, None, 0, None, None]
    replaced = store.replaced({1: _record(1, uid="b", parent="c")})
    assert (replaced.parent_of(1), store.parent_of(1)) == (3, 0)


def test_it_finds_every_record_holding_any_of_some_uids() -> None:
    uids = ["a", "b", None, "a", "c", "b", None]
    store = _stored([_record(k, uid=uid) for k, uid in enumerate(uids)], b"")
    assert store.holding_uids({"a", "b", "z"}) == {0: "a", 3: "a", 1: "b", 5: "b"}
    assert store.holding_uids({"z"}) == {}
    for uid in ("a", "b", "c"):
        assert set(store.holding_uids({uid})) == store.holding_uid(uid)


def _long_chain(size: int) -> list[Record]:
    """Return `size` records of a chain over several chunks, with the odd links a file has.

    A uid logged twice, a parent further back, a record without a uid, a
    parent no record holds, a parent that is the record's own uid, a loop.
    """
    records = []
    for k in range(size):
        uid: str | None = f"u{k}"
        parent: str | None = f"u{k - 1}" if k else None
        if k % 997 == 5:
            uid = f"u{k - 1}"  # the uid before it, again
        elif k % 1501 == 7:
            parent = f"u{k - 300}"
        elif k % 2003 == 9:
            uid = None
        elif k % 2503 == 11:
            parent = "gone"
        elif k % 3001 == 13:
            parent = uid
        elif k == 4096 * 2 + 40:
            parent = f"u{k + 20}"  # a loop with a record after it
        records.append(_record(k, uid=uid, parent=parent, results=[] if k % 3 else None))
    return records


def _walk_standing(records: list[Record], uid: str | None, last: bool) -> list[int]:
    """Return `_walk`'s path with the `last` record of each uid standing for it, if asked."""
    stands: dict[str, int] = {}
    for r in records:
        if r.uid is not None and (last or r.uid not in stands):
            stands[r.uid] = r.index
    path: list[int] = []
    current = stands.get(uid) if uid else None
    while current is not None and current not in path:
        path.append(current)
        parent = records[current].parent
        current = stands.get(parent) if parent is not None else None
    return path[::-1]


def _path_of(store: RecordStore, uid: str | None) -> list[int] | None:
    """Return `store.path_to(uid)` as a list (the store gives an array of indexes)."""
    found = store.path_to(uid)
    return None if found is None else list(found)


@pytest.mark.parametrize("last", [False, True])
def test_its_walks_over_many_chunks_are_the_views_walks(last: bool) -> None:
    records = _long_chain(4096 * 3 + 123)
    store = _stored(records, b"")
    store.stand_for_last(last)
    for k in (0, 5, 4095, 4096, 4097, 8232, 8252, len(records) - 1):
        uid = records[k].uid
        found = store.path_to(uid)
        assert found is not None and list(found) == _walk_standing(records, uid, last)
    stands = {}
    for r in records:
        if r.uid is not None and (last or r.uid not in stands):
            stands[r.uid] = r.index
    parents = [None if r.parent is None else stands.get(r.parent) for r in records]
    assert [store.parent_of(k) for k in range(len(records))] == parents
    path = store.path_to(records[-1].uid)
    assert path is not None and len(path) > 300
    every = list(range(len(records)))
    for trail in (path, every, every[::2], every[:1], [], [3, 4, 5, 9000, 9001, 4096, 4097]):
        views = [i for k, i in enumerate(trail) if k and parents[i] != trail[k - 1]]
        assert list(store.unlinked(trail)) == views
    assert list(store.roots()) == [r.index for r in records if r.uid and r.parent is None]
    assert _store_scans(store) == _scans(records)
    # A parent changed through a view: the walks follow it.
    store[4097].parent = "u12"
    assert _path_of(store, records[-1].uid) == _walk_standing(list(store), records[-1].uid, last)
    assert store.parent_of(4097) == stands["u12"]


def test_it_lists_the_records_read_with_an_error_and_their_plain_lines() -> None:
    source = b"".join(b"%04d" % k + b"x" * 6 for k in range(4))
    store = _stored([_record(k) for k in range(4)], source)
    store[2].error = "bad"
    store[1].parsed = {"a": 1}
    assert store.with_error() == [2]
    assert list(store.plain_lines([0, 1, 2, 3])) == [
        (0, b"0000x"),
        (1, None),
        (2, None),
        (3, b"0003x"),
    ]
    copy = store.replaced({3: _record(3, error="odd")})
    assert copy.with_error() == [2, 3]
    assert list(copy.plain_lines([0, 3])) == [(0, b"0000x"), (3, None)]


def test_a_uid_set_to_its_own_parent_is_a_parent_apart() -> None:
    # Read as a chain (b's parent is a), then b renamed "a": b's parent is now its own
    # uid, the line before holding it too, which `parents_apart` says it yields.
    store = _stored([_record(0, uid="a"), _record(1, uid="b", parent="a")], b"")
    store[1].uid = "a"
    copy = store.replaced({0: _record(0, uid="a")})
    assert list(store.parents_apart()) == list(copy.parents_apart()) == [(1, "a")]


def test_a_uid_or_parent_changed_through_a_replaced_copy_shows_in_the_stores_lookups() -> None:
    # The copy and its store share their columns: a change through either shows in both,
    # their uid tables and walks too.
    store = _stored(
        [_record(k, uid=f"u{k}", parent=f"u{k - 1}" if k else None) for k in range(4)], b""
    )
    assert store.first_with_uid("u2") == 2 and _path_of(store, "u3") == [0, 1, 2, 3]
    assert store.chained()
    copy = store.replaced({0: _record(0, uid="u0")})
    copy[2].uid = "new"
    copy[1].parent = None
    assert [store.first_with_uid(u) for u in ("new", "u2")] == [2, None]
    assert copy.first_with_uid("new") == 2
    assert _path_of(store, "new") == [1, 2] and _path_of(store, "u3") == [3]
    assert not store.chained()
    store[3].uid = "u9"  # and through the store: the copy's table follows
    assert copy.first_with_uid("u9") == 3 and copy.first_with_uid("u3") is None
