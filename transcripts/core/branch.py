"""The live branch of a session and the part of it the runtime sends to the model."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter

from transcripts.core.model import _SIDECHAIN, Record, Role, Transcript
from transcripts.core.store import RecordStore

# Return the index of the record standing for a given uid (see `uid_lookup`), or None.
UidLookup = Callable[[str], "int | None"]


def live_path(transcript: Transcript) -> list[int]:
    """Return the record indexes of the live branch, root first.

    For tree formats the branch runs from the last record written (the leaf,
    outside sidechains) back to its root through `parent` links; a record
    logged twice under one `uid` counts once. A file of sidechain records
    alone (a Claude Code subagent's own `agent-*.jsonl`, every line
    `isSidechain`) is that subagent's conversation: its leaf is its last
    record. Other formats: every record in file order. Which of the records
    holding one uid stands for it is the format's (`Transcript.last_copy`:
    pi's index of entries by id keeps the last; the first otherwise).

    A tool result parented on its own call's line rather than on the line
    before it (Claude Code writes parallel calls' results so) is off the
    chain; like Claude Code on resume, it is re-attached after the lines of
    its call's message. So is a result parented on a line logged twice when
    the second copy ends the file: the leaf is then that line's first copy.
    """
    return _listed(_live_path(transcript))


def _live_path(transcript: Transcript) -> Sequence[int]:
    """Return `live_path`'s branch: an array for a stored session's walk, else a list."""
    records = transcript.records
    if not transcript.tree:
        return [r.index for r in records if not r.inactive]
    leaf = _leaf(records, stands=stands_for(transcript))
    if leaf is None:
        return [r.index for r in records]
    by_uid = stands_for(transcript)
    return _reattach(records, by_uid, _path_to(records, by_uid, leaf), leaf.sidechain)


def _listed(path: Sequence[int]) -> list[int]:
    """Return `path` as a list (a stored session's walk gives an array)."""
    return path if isinstance(path, list) else list(path)


def _leaf(
    records: list[Record],
    gone: Callable[[int], bool] | None = None,
    stands: UidLookup | None = None,
) -> Record | None:
    """Return the live branch's leaf: the last readable record with a uid, sidechains last.

    `gone(index)` True leaves that record out (one a repair drops). A line
    logged twice is on a sidechain when the copy standing for its uid is
    (`stands`, the session's `stands_for`): the walk from it goes through
    that copy, so a main-chain copy of a sidechain line leads into the
    sidechain. Without `stands`, each line counts as it is marked.
    """

    def candidates() -> Iterable[Record]:
        return (
            r
            for r in reversed(records)
            if r.uid is not None and r.error is None and (gone is None or not gone(r.index))
        )

    def main_chain(record: Record) -> bool:
        if record.sidechain:
            return False
        at = stands(record.uid) if stands is not None and record.uid is not None else None
        return at is None or at == record.index or not records[at].sidechain

    leaf = next((r for r in candidates() if main_chain(r)), None)
    return leaf if leaf is not None else next(iter(candidates()), None)


def kept_leaf(transcript: Transcript, gone: Callable[[int], bool]) -> int | None:
    """Return the leaf's index when dropping the records `gone` names would move the session.

    A tree session resumes from its last record (Claude Code's `loadTranscriptFile`
    walks `parentUuid` back from the last line written), so dropping that
    record makes the record before it the leaf: the same branch when that
    record is on the live path, else another one, which nothing has checked.
    In any session, dropping every message leaves nothing to resume (Claude
    Code: "No conversation found with session ID"). The leaf is then the
    last message record. None: the leaf is not dropped, or the session
    resumes as it did without it.
    """
    records = transcript.records
    messages = (Role.USER, Role.ASSISTANT)
    if transcript.tree:
        leaf = _leaf(records, stands=stands_for(transcript))
    else:
        leaf = next((r for r in reversed(records) if r.role in messages), None)
    if leaf is None or not gone(leaf.index):
        return None
    if not transcript.tree:
        left = any(r.role in messages and not gone(r.index) for r in reversed(records))
        return None if left else leaf.index
    after = _leaf(records, gone, stands_for(transcript))
    if after is None:
        return leaf.index
    first = stands_for(transcript)(after.uid) if after.uid is not None else None
    on_path = first is not None and first in live_path(transcript)
    return None if on_path else leaf.index


def resumed_leaf(
    transcript: Transcript, gone: Callable[[int], bool], paired: Callable[[int], bool]
) -> int | None:
    """Return the record the session resumes from once the records `gone` names are dropped.

    That is the record standing for the uid of the last readable record left
    (`_leaf`), when no scope has paired it (`paired(index)` False): dropping
    the live branch's end moved the session to another branch. pi starts its
    walk at the file's last entry (session-manager.js `_buildIndex` keeps the
    last entry as the leaf), so dropping a stray result written last, whose
    parent is no entry of the file, hands the session to the branch before it.
    None: the session resumes on a branch already paired, or it is no tree.
    A sidechain's end (a leaf only once no main line is left) is never one.
    """
    if not transcript.tree or subagent_file(transcript):
        return None
    records = transcript.records
    leaf = _leaf(records, stands=stands_for(transcript))
    if leaf is None or not gone(leaf.index):
        return None  # the live branch's end stays: the session resumes where it did
    after = _leaf(records, gone, stands_for(transcript))
    if after is None or after.uid is None or after.sidechain:
        return None
    stands = stands_for(transcript)(after.uid)
    if stands is None or paired(stands):
        return None
    return stands


def path_from(transcript: Transcript, index: int) -> list[int]:
    """Return the branch that ends at record `index`, root first, as `live_path` finds one."""
    records = transcript.records
    by_uid = stands_for(transcript)
    leaf = records[index]
    return _listed(_reattach(records, by_uid, _path_to(records, by_uid, leaf), leaf.sidechain))


def leaf_index(transcript: Transcript) -> int | None:
    """Return the index of the record the live branch's walk starts from, or None.

    That is the record standing for the leaf's uid (`uid_lookup`): the end of
    the parent chain. Results `live_path` re-attaches after their call's
    message may follow it on the path; none of them is the leaf. None: not a
    tree session, or no record has a uid.
    """
    if not transcript.tree:
        return None
    leaf = _leaf(transcript.records, stands=stands_for(transcript))
    if leaf is None or leaf.uid is None:
        return None
    return stands_for(transcript)(leaf.uid)


def subagent_file(transcript: Transcript) -> bool:
    """Return True for a file of sidechain records alone (a Claude Code `agent-*.jsonl`).

    Such a file is one subagent's conversation, so its live branch is the
    path to its last record, and the chain a `compact_boundary` cut off is
    that conversation's history (as a main session's is), not a sidechain.
    """
    if not transcript.tree:
        return False
    leaf = _leaf(transcript.records, stands=stands_for(transcript))
    return leaf is not None and leaf.sidechain


def _reattach(
    records: list[Record], by_uid: UidLookup, path: Sequence[int], sidechain: bool
) -> Sequence[int]:
    """Return `path` with the off-path results of its unanswered calls put back after them.

    Only results of the path's own kind are put back: sidechain lines on a
    sidechain's path (`sidechain` True), main-chain lines on the main one;
    of a line logged twice, only the copy standing for its uid (`uid_lookup`).
    """
    # Flags by record index, not sets of indexes and ids: a long session's path holds
    # every record, and a flag costs a byte where a set entry costs tens.
    on_path = bytearray(len(records))
    for i in path:
        on_path[i] = 1
    candidates = []
    # By position first, and a stored session by its columns: only the records off the
    # path that hold results and no calls, of the path's kind, are read.
    if isinstance(records, RecordStore):
        lines: Iterable[int] = records.answer_lines(on_path, _SIDECHAIN, sidechain)
    else:
        lines = (
            r.index
            for r in records
            if not on_path[r.index] and r.sidechain == sidechain and r.results and not r.calls
        )
    stored = records if isinstance(records, RecordStore) else None
    for index in lines:
        if stored is not None:
            parent = stored.parent_of(index)
        else:
            record = records[index]
            parent = by_uid(record.parent) if record.parent is not None else None
        # The path runs through `by_uid`'s records: a parent is on it when its record is.
        if parent is not None and on_path[parent]:
            found = records[index]
            # A copy of a line logged twice that does not stand for its uid is no entry
            # of its own (pi's index holds the last copy): it answers nothing.
            if found.uid is None or by_uid(found.uid) == index:
                candidates.append(found)
    if not candidates:
        return path
    wanted = {result.tool_call_id for record in candidates for result in record.results}
    call_at, answered = _path_ids(records, path, wanted)
    extra: dict[int, list[int]] = {}
    for record in candidates:
        ids = [result.tool_call_id for result in record.results]
        if len(set(ids)) < len(ids) or not all(i in call_at and i not in answered for i in ids):
            continue
        at = call_at[ids[0]]
        group = records[path[at]].message_id
        while (
            group is not None and at + 1 < len(path) and records[path[at + 1]].message_id == group
        ):
            at += 1
        extra.setdefault(at, []).append(record.index)
        answered.update(ids)
    if not extra:
        return path
    out: list[int] | array[int] = array(path.typecode) if isinstance(path, array) else []
    for k, index in enumerate(path):
        out.append(index)
        out.extend(extra.get(k, ()))
    return out


def reattached(transcript: Transcript, path: Sequence[int]) -> Iterator[int]:
    """Yield the records of `path` (a tree's branch, root first) not linked to the one before.

    Each one's parent, as read, is not the record before it on `path`: a
    result `_reattach` put back after its call. The root is never one.
    """
    records = transcript.records
    if isinstance(records, RecordStore):
        yield from records.unlinked(path)
        return
    by_uid = stands_for(transcript)
    before: int | None = None
    for index in path:
        if before is not None:
            named = records[index].parent
            parent = None if named is None else by_uid(named)
            if parent != before:
                yield index
        before = index


def _path_ids(
    records: list[Record], path: Sequence[int], wanted: set[str]
) -> tuple[dict[str, int], set[str]]:
    """Return ({call id: its last position on `path`}, {ids answered on `path`}), ids in `wanted`.

    A stored session's calls and results are read in column space, not
    through a view of every record on the path.
    """
    if not isinstance(records, RecordStore):
        call_at = {c.id: k for k, i in enumerate(path) for c in records[i].calls if c.id in wanted}
        answered = {r.tool_call_id for i in path for r in records[i].results}
        return call_at, answered & wanted
    position = array("i" if len(records) < 2**31 else "q", [-1]) * len(records)
    for k, index in enumerate(path):
        position[index] = k
    call_at = {}
    for index, call_id in records.call_rows():
        k = position[index]
        if k >= 0 and call_id in wanted and k > call_at.get(call_id, -1):
            call_at[call_id] = k
    answered = {r for index, r in records.result_rows() if r in wanted and position[index] >= 0}
    return call_at, answered


def positions(path: Sequence[int], indexes: Iterable[int], size: int) -> list[int]:
    """Return the positions on `path` of the records among `indexes`, in path order.

    `size` is the number of records (every index on `path` is below it). A
    flag per record is read for a block of the path at once, not a lookup a record.
    """
    marks = bytearray(size)
    for index in indexes:
        marks[index] = 1
    found: list[int] = []
    block = 4096
    for start in range(0, len(path), block):
        part = path[start : start + block]
        flags = bytes(itemgetter(*part)(marks)) if len(part) > 1 else bytes([marks[part[0]]])
        at = flags.find(1)
        while at >= 0:
            found.append(start + at)
            at = flags.find(1, at + 1)
    return found


def stands_for(transcript: Transcript) -> UidLookup:
    """Return `uid_lookup` of the session's records, made once for a list of records.

    A list's lookup is kept on the Transcript (its records are not changed
    once read; a copy made by `dataclasses.replace` makes its own); a store
    keeps its own uid table.
    """
    records = transcript.records
    if isinstance(records, RecordStore):
        return records.first_with_uid
    if transcript.uid_index is None:
        transcript.uid_index = uid_lookup(records, transcript.last_copy)
    return transcript.uid_index


def uid_lookup(records: list[Record], last: bool = False) -> UidLookup:
    """Return a lookup of the record standing for each uid: the first holding it, or the `last`.

    A stored session answers as its store was told (`RecordStore.stand_for_last`,
    which the loader sets from the same format attribute as `last`).
    """
    if isinstance(records, RecordStore):
        return records.first_with_uid
    by_uid: dict[str, int] = {}
    for record in records:
        if record.uid is not None and (last or record.uid not in by_uid):
            by_uid[record.uid] = record.index
    return by_uid.get


def _path_to(records: list[Record], by_uid: UidLookup, leaf: Record) -> Sequence[int]:
    """Return the indexes from the root down to `leaf`, following `parent` links."""
    if isinstance(records, RecordStore):
        found = records.path_to(leaf.uid)
        if found is not None:
            return found
    path: list[int] = []
    # Each uid stands for one record (`uid_lookup`), so a flag per record index finds a
    # cycle at a byte a record rather than a set of ids.
    seen = bytearray(len(records))
    current = by_uid(leaf.uid) if leaf.uid else None
    while current is not None and not seen[current]:
        seen[current] = 1
        path.append(current)
        parent = records[current].parent
        current = by_uid(parent) if parent is not None else None
    path.reverse()
    return path


def branch_paths(transcript: Transcript) -> list[list[int]]:
    """Return the live path first, then the path of each sidechain, root first.

    A Claude Code sidechain (`isSidechain`, a subagent's conversation) is its
    own conversation; its path runs from its own root to its last record.
    Found once per Transcript (its records are not changed once read) and
    kept in `transcript.paths` as arrays of 32-bit indexes (4 bytes a record,
    where a list of ints costs about 36); each call returns new lists.
    """
    return [path.tolist() for path in branch_arrays(transcript)]


def branch_arrays(transcript: Transcript) -> list[array[int]]:
    """Return `branch_paths`'s branches as the arrays kept in `transcript.paths`.

    No copy: a caller reads them and never changes them. A list of a long
    branch costs about 36 bytes a record (an int object each) where the array
    costs 4.
    """
    if transcript.paths is None:
        code = "i" if len(transcript.records) < 2**31 else "q"
        transcript.paths = [array(code, path) for path in _branch_paths(transcript)]
    return transcript.paths


def _branch_paths(transcript: Transcript) -> list[Sequence[int]]:
    paths = [_live_path(transcript)]
    if not transcript.tree or subagent_file(transcript):
        return paths
    records = transcript.records
    by_uid = stands_for(transcript)
    leaves = _sidechain_leaves(transcript, by_uid)
    if not leaves:
        return paths
    # A byte a record, not a set of the live path's indexes (about 60 bytes each).
    paired = bytearray(len(records))
    for index in paths[0]:
        paired[index] = 1
    # Each record is paired in one scope, the first path that holds it: a sidechain on
    # the live path (a subagent's own file) adds none, and a line whose parent is in
    # another chain stays in that chain's scope.
    for leaf in leaves.values():
        whole = _reattach(records, by_uid, _path_to(records, by_uid, leaf), True)
        path = [i for i in whole if not paired[i]]
        if path:
            for index in path:
                paired[index] = 1
            paths.append(path)
    return paths


def _sidechain_leaves(
    transcript: Transcript, by_uid: UidLookup, gone: Callable[[int], bool] | None = None
) -> dict[str, Record]:
    """Return {root uid: its sidechain's leaf}: the last readable sidechain record of each root.

    `gone(index)` True leaves that record out (one a repair drops); roots are
    found on the records as read.
    """
    records = transcript.records
    root_of: dict[str, str] = {}

    def root(record: Record) -> str:
        trail: list[str] = []
        current: Record | None = record
        while current is not None and current.uid is not None and current.uid not in root_of:
            if current.uid in trail:
                break
            trail.append(current.uid)
            found = by_uid(current.parent) if current.parent is not None else None
            current = records[found] if found is not None else None
        top = root_of[current.uid] if current is not None and current.uid in root_of else trail[-1]
        for uid in trail:
            root_of[uid] = top
        return top

    last_leaf: dict[str, Record] = {}
    sidechain = (
        (records[i] for i in records.with_flag(_SIDECHAIN))
        if isinstance(records, RecordStore)
        else (r for r in records if r.sidechain)
    )
    for record in sidechain:
        readable = record.uid is not None and record.error is None
        if readable and (gone is None or not gone(record.index)):
            last_leaf[root(record)] = record
    return last_leaf


def kept_sidechain_leaves(transcript: Transcript, gone: Callable[[int], bool]) -> list[int]:
    """Return the sidechain leaves to keep when dropping the records `gone` names.

    A sidechain in a main session's file (a subagent's conversation, `isSidechain`)
    runs to its root's last line, as the live branch runs to the file's last
    (`kept_leaf`): dropping that line makes the root's line before it the leaf,
    on another branch when that line is off the sidechain's path, which
    nothing has checked. Those leaves' indexes, in file order; none for a
    subagent's own file (`kept_leaf` keeps its one leaf) or other formats.
    """
    if not transcript.tree or subagent_file(transcript):
        return []
    records = transcript.records
    by_uid = stands_for(transcript)
    before = _sidechain_leaves(transcript, by_uid)
    if not any(gone(leaf.index) for leaf in before.values()):
        return []
    after = _sidechain_leaves(transcript, by_uid, gone)
    kept = []
    for top, leaf in before.items():
        if not gone(leaf.index) or top not in after:
            continue
        new = after[top].uid
        stands = by_uid(new) if new is not None else None
        if stands is None or stands not in _path_to(records, by_uid, leaf):
            kept.append(leaf.index)
    return sorted(kept)


def context_scopes(transcript: Transcript) -> list[list[int]]:
    """Return the pairing scopes: the live context first, then each sidechain's."""
    return [live_context(transcript, path) for path in branch_arrays(transcript)]


def live_context(transcript: Transcript, path: Sequence[int] | None = None) -> list[int]:
    """Return the record indexes the runtime sends to the model, in conversation order.

    Starts at the last compaction boundary of the live path (Claude Code
    `compact_boundary`); after a pi/OpenClaw `compaction` entry, keeps the path
    from its `firstKeptEntryId` up to the entry, then what follows it.
    """
    records = transcript.records
    if path is None:
        path = live_path(transcript)
    # A stored session's marks come from its columns: no view of each record on the path.
    marks = records.context_marks() if isinstance(records, RecordStore) else None
    if marks is None:
        boundaries = {i for i in path if records[i].boundary}
        keeps = {i: keep for i in path if (keep := records[i].keep_from) is not None}
    else:
        boundaries, keeps = marks
    start = 0
    if boundaries:
        for k, index in enumerate(path):
            if index in boundaries:
                start = k
    context = path[start:]
    for k in range(len(context) - 1, -1, -1) if keeps else ():
        keep_from = keeps.get(context[k])
        if keep_from is None:
            continue
        if isinstance(records, RecordStore) and marks is not None:
            holding = records.holding_uid(keep_from)
            found = positions(context, holding, len(records))
            kept = next((j for j in found if j < k), k)
        else:
            kept = next((j for j in range(k) if records[context[j]].uid == keep_from), k)
        return _listed(context[kept:k]) + _listed(context[k + 1 :])
    return _listed(context)
