"""The overview page's figures: faults by kind, by format, by source and over time.

One pass over the fault counts of the sessions that have any (the session
list's denormalised `fault_counts`; no transcript is read), plus two grouped
counts. With 100,000 sessions that is a few hundred milliseconds on SQLite,
so a user's figures are cached for OVERVIEW_CACHE seconds.

The chart of faults over time is an SVG drawn by the template from the
geometry `chart` computes: stacked bars, one class per fault kind (colours
come from the stylesheet, so a strict Content-Security-Policy holds), each
segment titled with its numbers, and the same figures as a table beside it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Q
from django.utils import timezone

from transcripts.core.model import INFORMATIONAL
from transcripts.formats import label
from transcripts.models import FaultKinds, Session, SyncSource

DAYS = 30
OVERVIEW_CACHE = 60
KIND_ORDER = FaultKinds.values


@dataclass
class Group:
    """Sessions sharing a format or a source: how many, how many with faults, the faults."""

    label: str
    key: str = ""
    sessions: int = 0
    faulty: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    @property
    def fault_total(self) -> int:
        """Return the faults to fix (informational kinds left out)."""
        return sum(n for kind, n in self.faults.items() if kind not in INFORMATIONAL)


@dataclass
class Figures:
    """Everything the overview shows, for one user's workspaces."""

    sessions: int
    faulty: int
    live: int
    unreadable: int
    by_kind: list[tuple[str, int, int]]  # (kind, faults, sessions with it)
    by_format: list[Group]
    by_source: list[Group]
    days: list[tuple[date, Counter[str]]]
    made_at: Any


def figures(user: Any, today: date | None = None) -> Figures:
    """Return the overview figures of `user`'s sessions, from the cache when fresh."""
    key = f"pairfix-overview-{user.pk}"
    cached = cache.get(key)
    if cached is not None and today is None:
        return cached  # type: ignore[no-any-return]
    result = _figures(user, today or timezone.localdate())
    cache.set(key, result, OVERVIEW_CACHE)
    return result


def _figures(user: Any, today: date) -> Figures:
    sessions = Session.objects.for_user(user).order_by()
    now = timezone.now()
    totals = sessions.aggregate(
        sessions=Count("pk"),
        live=Count("pk", filter=Q(live_until__gt=now)),
        unreadable=Count("pk", filter=~Q(error="")),
    )
    formats = {
        row["format"]: Group(label(row["format"]), row["format"], row["n"])
        for row in sessions.values("format").annotate(n=Count("pk"))
    }
    names = dict(SyncSource.objects.for_user(user).values_list("pk", "name"))
    sources = {
        row["source"]: Group(
            names.get(row["source"], "uploads") if row["source"] else "uploads (no source)",
            str(row["source"] or ""),
            row["n"],
        )
        for row in sessions.values("source").annotate(n=Count("pk"))
    }
    first_day = today - timedelta(days=DAYS - 1)
    days: dict[date, Counter[str]] = {first_day + timedelta(days=n): Counter() for n in range(DAYS)}
    kinds: Counter[str] = Counter()
    with_kind: Counter[str] = Counter()
    rows = (
        sessions.exclude(fault_counts={})
        .values_list("format", "source", "created", "fault_counts")
        .iterator(chunk_size=5000)
    )
    faulty = 0
    for format, source, created, counts in rows:
        kinds.update(counts)
        with_kind.update(counts.keys())
        # A session whose findings are all informational has nothing to fix.
        to_fix = any(kind not in INFORMATIONAL for kind in counts)
        faulty += to_fix
        for group in (formats.get(format), sources.get(source)):
            if group is not None:
                group.faulty += to_fix
                group.faults.update(counts)
        day = timezone.localtime(created).date()
        if day in days:
            days[day].update(counts)
    by_kind = [(kind, kinds[kind], with_kind[kind]) for kind in KIND_ORDER if kinds[kind]]
    return Figures(
        sessions=totals["sessions"],
        faulty=faulty,
        live=totals["live"],
        unreadable=totals["unreadable"],
        by_kind=by_kind,
        by_format=sorted(formats.values(), key=lambda g: (-g.fault_total, -g.sessions, g.label)),
        by_source=sorted(sources.values(), key=lambda g: (-g.fault_total, -g.sessions, g.label)),
        days=sorted(days.items()),
        made_at=now,
    )


@dataclass(frozen=True)
class Segment:
    """One kind's part of a day's bar: where it is drawn (SVG units) and what it counts."""

    kind: str
    count: int
    y: float
    height: float


@dataclass(frozen=True)
class Bar:
    """One day of the chart."""

    day: date
    x: float
    total: int
    segments: tuple[Segment, ...]
    label: str = ""


@dataclass(frozen=True)
class Chart:
    """A stacked bar chart's geometry in a WIDTH × HEIGHT view box."""

    bars: tuple[Bar, ...]
    peak: int
    ticks: tuple[tuple[float, int], ...]  # (y, value) of the horizontal grid lines
    bar_width: float
    width: int = 720
    height: int = 220
    left: int = 40
    bottom: int = 24


def chart(days: list[tuple[date, Counter[str]]], width: int = 720, height: int = 220) -> Chart:
    """Return the geometry of a stacked bar chart of `days` (a bar a day, a segment a kind).

    Kinds stack in KIND_ORDER from the bottom. The scale's top is the largest
    day rounded up to a round number; every seventh day is labelled.
    """
    left, right, bottom, top = 40, 24, 24, 8
    plot_height = height - bottom - top
    peak = max((sum(counts.values()) for _, counts in days), default=0)
    scale_top = _round_up(peak)
    slot = (width - left - right) / max(len(days), 1)
    bar_width = max(slot * 0.7, 1.0)
    bars = []
    for n, (day, counts) in enumerate(days):
        y = float(height - bottom)
        segments = []
        for kind in KIND_ORDER:
            if counts.get(kind):
                size = counts[kind] / scale_top * plot_height
                y -= size
                segments.append(Segment(kind, counts[kind], round(y, 2), round(size, 2)))
        label = day.strftime("%b %d") if (len(days) - 1 - n) % 7 == 0 else ""
        bars.append(
            Bar(
                day,
                round(left + n * slot + (slot - bar_width) / 2, 2),
                sum(counts.values()),
                tuple(segments),
                label,
            )
        )
    ticks = tuple(
        (round(height - bottom - plot_height * part / 4, 2), scale_top * part // 4)
        for part in range(5)
    )
    return Chart(tuple(bars), peak, ticks, round(bar_width, 2), width, height, left, bottom)


def _round_up(value: int) -> int:
    """Return the smallest of 4, 8, 20, 40, 80, 200, … that is at least `value`."""
    step = 4
    while step < value:
        step = (
            step * 2 if str(step)[0] == "4" else step * 5 // 2 if str(step)[0] == "8" else step * 2
        )
    return step
