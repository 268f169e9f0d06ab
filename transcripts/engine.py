"""One call from raw bytes to everything the dashboard, the CLI and the jobs show.

Pure Python (no Django): sniff and parse the file, detect faults, plan a
repair under a policy, render the repaired bytes and the side-by-side rows.
Repair is a pure function of (bytes, format, policy, ENGINE_VERSION).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from transcripts import formats
from transcripts.core.align import Row, align
from transcripts.core.detect import DEFAULT_GRACE, detect, is_live, pair
from transcripts.core.model import Fault, Plan, Transcript
from transcripts.core.policy import DEFAULT_POLICY, PRESETS
from transcripts.core.repair import repair
from transcripts.formats import FormatError

ENGINE_VERSION = "1"

__all__ = ["ENGINE_VERSION", "Analysis", "FormatError", "analyze", "PRESETS", "DEFAULT_POLICY"]


@dataclass
class Analysis:
    """What Pairfix makes of one file.

    `error` is set (and `repairable` False) when the file could not be read as
    any supported format; the message names the file, the line and the reason.
    `repaired` equals the raw bytes when the plan is empty or nothing can be repaired.
    """

    filename: str
    format: str
    format_label: str
    provider: str
    record_count: int
    faults: list[Fault]
    plan: Plan
    repaired: bytes
    error: str | None = None
    transcript: Transcript | None = field(default=None, repr=False)

    @cached_property
    def rows(self) -> list[Row]:
        """Return the side-by-side rows (raw and repaired), computed on first use."""
        if self.transcript is None:
            return []
        return align(self.transcript, self.faults, self.plan)

    @property
    def repairable(self) -> bool:
        """Return True when the file parsed and a repair can be offered."""
        return self.error is None

    @property
    def fault_counts(self) -> dict[str, int]:
        """Return {fault kind id: count}, most frequent first."""
        return dict(Counter(str(f.kind) for f in self.faults).most_common())


def analyze(
    data: bytes,
    filename: str,
    policy: str = DEFAULT_POLICY,
    format: str | None = None,
    *,
    now: float | None = None,
    last_write: float | None = None,
    grace: float = DEFAULT_GRACE,
) -> Analysis:
    """Parse `data`, detect its faults and plan and render a repair under `policy`.

    `format` overrides sniffing. `now` and `last_write` (seconds since the
    epoch) mark a session still being written: its unanswered tail calls are
    then `pending_result` (see `detect.detect`). Never raises for bad content:
    an unreadable file comes back with `error` set and the raw bytes as
    `repaired`. Raises KeyError for an unknown policy name.
    """
    chosen = PRESETS[policy]
    try:
        transcript = formats.load(data, filename, format)
        pairing = pair(
            transcript,
            live=is_live(now, last_write, grace),
            replays_aborted=chosen.replays_aborted,
        )
        faults = detect(transcript, pairing)
        plan = repair(transcript, faults, chosen, pairing)
        repaired = formats.render(transcript, plan) if plan else data
    except FormatError as exc:
        return _unreadable(data, filename, policy, str(exc), exc.format, exc.records)
    except RecursionError:
        # Python's own JSON code recurses; a hostile file may nest beyond its stack.
        reason = f"{filename}: JSON nested too deeply to read or repair safely"
        return _unreadable(data, filename, policy, reason, None, 0)
    return Analysis(
        filename=filename,
        format=transcript.format,
        format_label=formats.label(transcript.format),
        provider=transcript.provider,
        record_count=len(transcript.records),
        faults=faults,
        plan=plan,
        repaired=repaired,
        transcript=transcript,
    )


def _unreadable(
    data: bytes, filename: str, policy: str, error: str, format: str | None, records: int
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
        repaired=data,
        error=error,
    )
