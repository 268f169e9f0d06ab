"""The live branch of a session and the part of it the runtime sends to the model."""

from __future__ import annotations

from transcripts.core.model import Record, Transcript


def live_path(transcript: Transcript) -> list[int]:
    """Return the record indexes of the live branch, root first.

    For tree formats the branch runs from the last record written (the leaf,
    outside sidechains) back to its root through `parent` links; a record
    logged twice under one `uid` counts once. Other formats: every record in
    file order.
    """
    records = transcript.records
    if not transcript.tree:
        return [r.index for r in records]
    by_uid: dict[str, Record] = {}
    for record in records:
        if record.uid is not None and record.uid not in by_uid:
            by_uid[record.uid] = record
    leaf = next(
        (
            r
            for r in reversed(records)
            if r.uid is not None and not r.sidechain and r.obj is not None
        ),
        None,
    )
    if leaf is None:
        return [r.index for r in records]
    path: list[int] = []
    seen: set[str] = set()
    current: Record | None = by_uid[leaf.uid] if leaf.uid else None
    while current is not None and current.uid not in seen:
        assert current.uid is not None
        seen.add(current.uid)
        path.append(current.index)
        current = by_uid.get(current.parent) if current.parent is not None else None
    path.reverse()
    return path


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
