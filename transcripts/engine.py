"""One call from raw bytes to everything the dashboard, the CLI and the jobs show.

Pure Python (no Django): sniff and parse the file, detect faults, plan a
repair under a policy, render the repaired bytes and the side-by-side rows.
Repair is a pure function of (bytes, format, policy, ENGINE_VERSION).
"""

from __future__ import annotations

import functools
import gc
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, BinaryIO

from transcripts import formats
from transcripts.core.detect import DEFAULT_GRACE, is_live, pair
from transcripts.core.model import Fault, Plan, Transcript
from transcripts.core.outcome import repaired_faults
from transcripts.core.policy import DEFAULT_POLICY, PRESETS, Policy
from transcripts.core.repair import settle
from transcripts.formats import FormatError
from transcripts.formats.loader import is_document
from transcripts.formats.source import FileSource

if TYPE_CHECKING:
    from transcripts.core.align import Row

# 8: a tool_use id matched whole against Anthropic's pattern (a final newline refused), a
# main-chain copy of a sidechain line on the sidechain, a pi record without an id no parent
# (one with "" still one), a member written twice changed where readers take it, a Claude
# Code result moved last linked after its call, no endless pairing of a resumed branch;
# 7: call ids pi rewrites as it resumes are no malformed_call (OpenClaw), rewritten records
# in UTF-8 unless the file escapes non-ASCII, pi parent loops broken (`parent_loop`), pi
# results re-attached after their call linked to the entry before them, the first entry of a
# branch whose top moves given its link;
# 6: pi results lost off their branch put back under their call, Claude Code self-parented
# lines read under the line before, a repair that moves the resumed branch mends it too;
# 5: a synthetic result row's role; 4: subagent compactions, pi providers by path, relinked
# rows; 3: ids `-2`
ENGINE_VERSION = "8"

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_POLICY",
    "ENGINE_VERSION",
    "PRESETS",
    "Analysis",
    "FileSource",
    "FormatError",
    "analyze",
]


@dataclass
class Analysis:
    """What Pairfix makes of one file.

    `error` is set (and `repairable` False) when the file could not be read as
    any supported format; the message names the file, the line and the reason.
    `not_a_session` is then True when the file is valid JSON or JSON lines of
    no format Pairfix reads, or JSON lines after a first line that is no JSON
    (a settings or log file, not a broken session);
    `agent_file` names an agent's own file that is none ("Codex's prompt history ...").
    `packing` names the compression the file is in ("gzip", "zip"), else "".
    `repaired` (rendered on first use) equals the raw bytes when the plan is
    empty or nothing can be repaired; `write_repaired` streams it instead.
    """

    filename: str
    format: str
    format_label: str
    provider: str
    record_count: int
    faults: list[Fault]
    plan: Plan
    raw: bytes | FileSource = field(repr=False)
    error: str | None = None
    not_a_session: bool = False
    agent_file: str = ""
    packing: str = ""
    transcript: Transcript | None = field(default=None, repr=False)
    policy: Policy | None = field(default=None, repr=False)

    @cached_property
    def repaired(self) -> bytes:
        """Return the repaired file's bytes (the raw bytes when there is nothing to do)."""
        if self.transcript is None or not self.plan:
            return self.raw if isinstance(self.raw, bytes) else self.raw[0 : len(self.raw)]
        return formats.render(self.transcript, self.plan)

    def write_repaired(self, out: BinaryIO) -> None:
        """Write the repaired file to `out`, streaming untouched bytes from the source."""
        if self.transcript is None:
            out.write(self.repaired)
            return
        formats.render_to(self.transcript, self.plan, out)

    @cached_property
    def rows(self) -> list[Row]:
        """Return the side-by-side rows (raw and repaired), computed on first use."""
        if self.transcript is None:
            return []
        from transcripts.core.align import align  # rows are for showing: `fix` needs none

        relinked = formats.relinked(self.transcript, self.plan)
        return align(self.transcript, self.faults, self.plan, relinked)

    def iter_rows(self) -> Iterator[Row]:
        """Yield the side-by-side rows of `rows` in order, made one at a time and not kept.

        The rows `rows` holds when it was computed already; else each is made
        as it is asked for (`core.align.iter_align`), so a timeline build of a
        long session never holds them all.
        """
        if "rows" in self.__dict__ or self.transcript is None:
            return iter(self.rows)
        from transcripts.core.align import iter_align

        relinked = formats.relinked(self.transcript, self.plan)
        return iter_align(self.transcript, self.faults, self.plan, relinked)

    @property
    def repairable(self) -> bool:
        """Return True when the file parsed and a repair can be offered."""
        return self.error is None

    @property
    def fault_counts(self) -> dict[str, int]:
        """Return {fault kind id: count}, most frequent first (then by kind id)."""
        return count_faults(Counter(str(f.kind) for f in self.faults))

    def repaired_counts(self) -> tuple[int, dict[str, int]]:
        """Return (record count, fault counts) of the repaired file, as `analyze` reports them.

        That is what `analyze(self.repaired, self.filename, self.plan.policy,
        format=self.format)` would say (not live), found from the plan where
        `core.outcome` can account for it and by that second analysis
        otherwise. The counts are ordered as `fault_counts` orders them.
        """
        if self.transcript is None or not self.plan:
            return self.record_count, self.fault_counts
        change = formats.rewrite(self.transcript, self.plan)
        counts = repaired_faults(
            self.faults, self.plan, change.replaced, change.records, change.placed
        )
        if counts is not None:
            return change.record_count, count_faults(
                Counter({str(k): n for k, n in counts.items()})
            )
        again = self.policy if self.policy is not None else self.plan.policy
        with self.repaired_file() as repaired:
            # Counting needs no previews: without them the second store costs less.
            after = analyze(repaired, self.filename, again, format=self.format, summaries=False)
            return after.record_count, after.fault_counts

    @contextmanager
    def repaired_file(self) -> Iterator[bytes | FileSource]:
        """Yield the repaired file to read back: bytes, or for a streamed file a FileSource.

        A streamed file's repair is written to a temporary file (gone once the
        `with` ends) and read from there, never held in memory; with nothing
        to repair, that is the raw source itself. Raises OSError when the
        temporary folder cannot be written.
        """
        if isinstance(self.raw, bytes):
            yield self.repaired
        elif self.transcript is None or not self.plan:
            yield self.raw
        else:
            with tempfile.TemporaryFile(prefix="pairfix-repaired-") as f:
                self.write_repaired(f)
                f.flush()
                with FileSource.of_file(f) as source:
                    yield source


def count_faults(counts: Counter[str]) -> dict[str, int]:
    """Return {fault kind id: count} of `counts`, most frequent first, then by kind id."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def analyze(
    data: bytes | FileSource,
    filename: str,
    policy: str | Policy = DEFAULT_POLICY,
    format: str | None = None,
    *,
    now: float | None = None,
    last_write: float | None = None,
    grace: float = DEFAULT_GRACE,
    summaries: bool = True,
) -> Analysis:
    """Parse `data`, detect its faults and plan a repair under `policy`.

    `summaries` False keeps no preview texts of a streamed file's records,
    and their calls' arguments only as digests (see `formats.load`): for a
    repair that shows no rows (`rows` then have empty summaries), at less
    memory per record.

    `data` is the file's bytes, or a FileSource for a file too large to hold
    in memory (JSON lines are then streamed; keep the source open while the
    analysis is used). `format` overrides sniffing. `now` and `last_write`
    (seconds since the epoch) mark a session still being written: its
    unanswered tail calls are then `pending_result` (see `detect.detect`).
    `policy` is a preset's name or a Policy (a workspace's own, say).
    A JSON document is analysed with Python's automatic garbage collection
    paused (see `_collection_paused`), left as it was once it returns.
    Never raises for bad content: an unreadable file comes back with `error`
    set. Raises KeyError for an unknown policy name, OSError when a
    FileSource cannot be read and MemoryError when parsing needs more memory
    than the process may have (never read as a malformed record).
    """
    chosen = PRESETS[policy] if isinstance(policy, str) else policy
    policy = chosen.name
    try:
        with _collection_paused(is_document(data, format)):
            transcript = formats.load(data, filename, format, summaries=summaries)
            pairing = pair(
                transcript,
                live=is_live(now, last_write, grace),
                replays_aborted=chosen.replays_aborted,
            )
            faults, plan = settle(transcript, pairing, chosen)
    except FormatError as exc:
        return _unreadable(
            data,
            filename,
            policy,
            str(exc),
            exc.format,
            exc.records,
            not_a_session=exc.unknown,
            agent_file=exc.agent_file,
            packing=exc.packing,
        )
    except RecursionError:
        # Python's own JSON code recurses; a hostile file may nest beyond its stack.
        reason = f"{filename}: JSON nested too deeply to read or repair safely"
        return _unreadable(data, filename, policy, reason, None, 0)
    analysis = Analysis(
        filename=filename,
        format=transcript.format,
        format_label=formats.label(transcript.format),
        provider=transcript.provider,
        record_count=len(transcript.records),
        faults=faults,
        plan=plan,
        raw=data,
        transcript=transcript,
        policy=chosen,
    )
    if isinstance(data, bytes):
        try:
            _ = analysis.repaired  # render now, where a failure is reported as unreadable
        except RecursionError:
            reason = f"{filename}: JSON nested too deeply to read or repair safely"
            return _unreadable(data, filename, policy, reason, None, 0)
    return analysis


@contextmanager
def _collection_paused(pause: bool) -> Iterator[None]:
    """Within this block, with `pause`, Python's cyclic garbage collector does not run by itself.

    For a JSON document's load and its pairing: each of its records is a few
    objects that live as long as the analysis, so a collection while they are
    made frees nothing and walks every one of them (a fifth of the time of a
    20,000-record document). They hold no reference cycles. At the end the
    objects made meanwhile join the oldest generation, where the next full
    collection walks them (and frees any garbage of others among them).
    Left as it is when collection is off already (a caller that turned it off
    keeps it off).
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not _froze_its_own():
            # Every object made meanwhile would be walked by the next collection of the
            # youngest generation: moved (without a walk) to the oldest instead, as
            # objects that live long are. Not where the process froze objects of its
            # own (gc.freeze before forking, say): unfreezing would thaw those too.
            gc.freeze()
            gc.unfreeze()
        gc.enable()


@functools.cache
def _froze_its_own() -> bool:
    """Return True when the process froze objects of its own (a worker does, at start).

    Asked once: `gc.get_freeze_count` walks every frozen object, and a worker
    freezes tens of thousands before its first task (`project.celery`).
    """
    return gc.get_freeze_count() > 0


def _unreadable(
    data: bytes | FileSource,
    filename: str,
    policy: str,
    error: str,
    format: str | None,
    records: int,
    *,
    not_a_session: bool = False,
    agent_file: str = "",
    packing: str = "",
) -> Analysis:
    """Return the analysis of a file that could not be read: raw bytes, the reason."""
    return Analysis(
        filename=filename,
        format=format or "unknown",
        format_label=formats.label(format or "unknown"),
        provider="",
        record_count=records,
        faults=[],
        plan=Plan(policy=policy),
        raw=data,
        error=error,
        not_a_session=not_a_session,
        agent_file=agent_file,
        packing=packing,
    )
