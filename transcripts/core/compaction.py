"""What a compaction hid: the records the runtime no longer sends, and their would-be faults.

After a compaction (a Claude Code `compact_boundary` line, a pi/OpenClaw
`compaction` entry) the runtime sends the live context only (see
`branch.live_context`), so `detect` rightly reports no pairing fault in the
history before it: the provider never sees it. A reviewer still wants to
know what is broken there (it is what a user reads when scrolling back, and
what a tool that replays the whole file would send), so this module pairs
that history on its own, without changing what counts as a fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transcripts.core.branch import context_scopes, subagent_file
from transcripts.core.detect import Pairing, _pair_scope
from transcripts.core.model import Fault, Record, Transcript


@dataclass(frozen=True, slots=True)
class Compacted:
    """The history before the last compaction.

    `boundary` is the record index of the last compaction; `hidden` the
    indexes of the records before it that the runtime does not send (in file
    order; sidechains excluded, but for a subagent's own file, which is all
    sidechain); `faults` what `detect` would report there if that history
    were sent, each segment between two compactions paired on its own,
    sorted by record then block.
    """

    boundary: int
    hidden: tuple[int, ...]
    faults: list[Fault] = field(default_factory=list)


def _is_compaction(record: Record) -> bool:
    return record.boundary or record.keep_from is not None


def before_compaction(transcript: Transcript) -> Compacted | None:
    """Return what the last compaction of the live branch hid; None when there was none."""
    records = transcript.records
    scopes = context_scopes(transcript)
    sent = {index for scope in scopes for index in scope}
    # A subagent's own file is all sidechain: there its records are the conversation's.
    own = subagent_file(transcript)
    boundaries = [r.index for r in records if _is_compaction(r) and (own or not r.sidechain)]
    if not boundaries:
        return None
    boundary = boundaries[-1]
    hidden = tuple(
        r.index
        for r in records[:boundary]
        if r.index not in sent and (own or not r.sidechain) and not _is_compaction(r)
    )
    # A set: looking each record up in the tuple made this quadratic (50,000 records: 9 s).
    hidden_set = set(hidden)
    # Each run of history between two compactions was once a context of its own.
    segments: list[list[int]] = [[]]
    for record in records[:boundary]:
        if _is_compaction(record):
            segments.append([])
        elif record.index in hidden_set and not record.inactive and record.error is None:
            segments[-1].append(record.index)
    faults: list[Fault] = []
    for segment in segments:
        if segment:
            # The same pairing `detect` runs on the live context, run on this scope.
            pairing = Pairing(segment, [])
            _pair_scope(transcript, segment, pairing, False)
            faults.extend(pairing.faults)
    faults.sort(key=lambda f: (f.record, -1 if f.block is None else f.block, str(f.kind)))
    return Compacted(boundary, hidden, faults)
