"""The live branch of a session and the part of it the runtime sends to the model."""

from __future__ import annotations

from transcripts.core.model import Record, Role, Transcript


def live_path(transcript: Transcript) -> list[int]:
    """Return the record indexes of the live branch, root first.

    For tree formats the branch runs from the last record written (the leaf,
    outside sidechains) back to its root through `parent` links; a record
    logged twice under one `uid` counts once. Other formats: every record in
    file order.
    """
    records = transcript.records
    if not transcript.tree:
        return [r.index for r in records if not r.inactive]
    by_uid = _by_uid(records)
    leaf = next(
        (r for r in reversed(records) if r.uid is not None and not r.sidechain and r.error is None),
        None,
    )
    if leaf is None:
        return [r.index for r in records]
    path = _path_to(by_uid, leaf)
    return _reattached(records, path) if transcript.reattaches else path


def _reattached(records: list[Record], path: list[int]) -> list[int]:
    """Return `path` with the parallel tool results that hang off it put back in place.

    Claude Code writes each block of one API response as a line of its own
    (one `message.id`), and may parent each tool result on its own call's
    line: the results then form a DAG, the branch to the last line passing
    through one of them only. Its loader re-attaches the others to the chain
    (reproduced here: a user line of results off the path, parented on a call
    line of the path, whose every result answers a call of that message not
    answered on the path, joins after the message's results), so they are not
    missing.
    """
    on = set(path)
    hanging: dict[str, list[int]] = {}
    for record in records:
        if (
            record.results
            and record.role is Role.USER
            and not record.other_blocks
            and not record.sidechain
            and record.parent is not None
            and record.index not in on
        ):
            hanging.setdefault(record.parent, []).append(record.index)
    if not hanging:
        return path
    # A result whose call is answered on the path already belongs to another branch
    # (a rewind), not to this one.
    answered = {res.tool_call_id for index in path for res in records[index].results}
    out: list[int] = []
    extra: list[int] = []
    group: str | None = None
    called: set[str] = set()
    for index in path:
        record = records[index]
        same = record.role is Role.ASSISTANT and group is not None and record.message_id == group
        answers = record.role is Role.USER and bool(record.results) and not record.other_blocks
        if not (same or answers):
            out.extend(extra)
            extra = []
            called = set()
            group = record.message_id if record.role is Role.ASSISTANT else None
        out.append(index)
        if record.role is Role.ASSISTANT:
            called.update(call.id for call in record.calls)
        for child in hanging.pop(record.uid or "", ()) if record.calls else ():
            ids = {res.tool_call_id for res in records[child].results}
            if ids <= called and not ids & answered:
                answered |= ids
                extra.append(child)
    out.extend(extra)
    return out


def _by_uid(records: list[Record]) -> dict[str, Record]:
    by_uid: dict[str, Record] = {}
    for record in records:
        if record.uid is not None and record.uid not in by_uid:
            by_uid[record.uid] = record
    return by_uid


def _path_to(by_uid: dict[str, Record], leaf: Record) -> list[int]:
    """Return the indexes from the root down to `leaf`, following `parent` links."""
    path: list[int] = []
    seen: set[str] = set()
    current: Record | None = by_uid.get(leaf.uid) if leaf.uid else None
    while current is not None and current.uid not in seen:
        assert current.uid is not None
        seen.add(current.uid)
        path.append(current.index)
        current = by_uid.get(current.parent) if current.parent is not None else None
    path.reverse()
    return path


def branch_paths(transcript: Transcript) -> list[list[int]]:
    """Return the live path first, then the path of each sidechain, root first.

    A Claude Code sidechain (`isSidechain`, a subagent's conversation) is its
    own conversation; its path runs from its own root to its last record.
    """
    paths = [live_path(transcript)]
    if not transcript.tree:
        return paths
    records = transcript.records
    by_uid = _by_uid(records)
    root_of: dict[str, str] = {}

    def root(record: Record) -> str:
        trail: list[str] = []
        current: Record | None = record
        while current is not None and current.uid is not None and current.uid not in root_of:
            if current.uid in trail:
                break
            trail.append(current.uid)
            current = by_uid.get(current.parent) if current.parent is not None else None
        top = root_of[current.uid] if current is not None and current.uid in root_of else trail[-1]
        for uid in trail:
            root_of[uid] = top
        return top

    last_leaf: dict[str, Record] = {}
    for record in records:
        if record.sidechain and record.uid is not None and record.error is None:
            last_leaf[root(record)] = record
    paths.extend(_path_to(by_uid, leaf) for leaf in last_leaf.values())
    return paths


def context_scopes(transcript: Transcript) -> list[list[int]]:
    """Return the pairing scopes: the live context first, then each sidechain's."""
    return [live_context(transcript, path) for path in branch_paths(transcript)]


def live_context(transcript: Transcript, path: list[int] | None = None) -> list[int]:
    """Return the record indexes the runtime sends to the model, in conversation order.

    Starts at the last compaction boundary of the live path (Claude Code
    `compact_boundary`); after a pi/OpenClaw `compaction` entry, keeps the path
    from its `firstKeptEntryId` up to the entry, then what follows it.
    """
    records = transcript.records
    if path is None:
        path = live_path(transcript)
    start = 0
    for k, index in enumerate(path):
        if records[index].boundary:
            start = k
    context = path[start:]
    for k in range(len(context) - 1, -1, -1):
        keep_from = records[context[k]].keep_from
        if keep_from is None:
            continue
        kept = next(
            (j for j in range(k) if records[context[j]].uid == keep_from),
            k,
        )
        return context[kept:k] + context[k + 1 :]
    return context
