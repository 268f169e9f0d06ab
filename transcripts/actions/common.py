"""What every domain's actions share: their exceptions, the audit log writer and the head writer.

`write_head` is the one place a session gets a new head revision: ingest,
a repair or rollback job, a sync's append or rewrite and an API append all
call it, so the session fields that follow from the head are refreshed in
one list (`HEAD_FIELDS`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from transcripts import search
from transcripts.engine import Analysis, analyze
from transcripts.models import (
    AuditLog,
    JobItem,
    Revision,
    Session,
    store_blob_file,
)
from transcripts.policies import policy_for

EventType = AuditLog.EventType
UNFINISHED = (JobItem.Status.QUEUED, JobItem.Status.RUNNING)


class FenceLost(Exception):
    """The session's head moved away from the revision the job started from."""


class JobStateError(Exception):
    """The job is not in a state that allows what was asked (the message says why)."""


def audit(
    event_type: str,
    *,
    workspace_id: int,
    acting_user: Any,
    on_behalf_of: Any = None,
    **fields: Any,
) -> AuditLog:
    """Write one AuditLog row for `event_type` in `workspace_id`; the caller holds the transaction.

    `fields` are the targets (session, job, source, revision, or their
    `_id`s, `on_behalf_of_id` too) and `extra_data`. A person acting is
    `acting_user`; for a change a sync or a worker makes, `acting_user` is
    None and `on_behalf_of` the user who set the source or job up.
    """
    if on_behalf_of is not None:
        fields["on_behalf_of"] = on_behalf_of
    actor = acting_user if getattr(acting_user, "is_authenticated", False) else None
    return AuditLog.objects.create(
        event_type=event_type, workspace_id=workspace_id, acting_user=actor, **fields
    )


def fit_name(name: str, limit: int) -> str:
    """Return `name` cut to at most `limit` characters: its start, "…", then its extension.

    The extension stays so the format is still recognised from the name.
    """
    if len(name) <= limit:
        return name
    stem, extension = os.path.splitext(name)
    if len(extension) > limit // 2:
        stem, extension = name, ""
    return stem[: limit - 1 - len(extension)] + "…" + extension


def live_fields(last_write: datetime | None) -> dict[str, Any]:
    """Return `analyze`'s live keywords for a session last written at `last_write`.

    {} when unknown; otherwise now and last_write in seconds since the epoch and
    settings.LIVE_GRACE, so unanswered tail calls are `pending_result` within it.
    """
    if last_write is None:
        return {}
    return {"now": time.time(), "last_write": last_write.timestamp(), "grace": settings.LIVE_GRACE}


def live_until(last_write: datetime | None) -> datetime | None:
    """Return when a session last written at `last_write` stops being live (None if unknown)."""
    return None if last_write is None else last_write + timedelta(seconds=settings.LIVE_GRACE)


@contextmanager
def open_analysis(
    revision: Revision,
    policy: str,
    *,
    last_write: datetime | None = None,
    format: str | None = None,
    summaries: bool = False,
) -> Iterator[Analysis]:
    """Yield the analysis of `revision`'s bytes under `policy` (KeyError if unknown).

    With `last_write` (when the session's source was last written) the
    session is checked for being live now: its unanswered tail calls are
    then `pending_result` while within the engine's grace period. `format`
    (a format id) overrides the session's sniffed format.

    The revision is read through a FileSource (`Revision.source`), so a JSON-lines
    session is never held whole; the source stays open inside the `with`. Its
    records keep no preview texts unless `summaries` (see `analyze`): enough
    for repairs, exports and downloads, not for showing rows or previews.
    """
    session = revision.session
    known_format = session.format if session.format != "unknown" and not session.error else None
    with revision.source() as source:
        yield analyze(
            source,
            session.name,
            policy_for(policy, session.workspace_id),
            format=format or known_format,
            **live_fields(last_write),
            summaries=summaries,
        )


def store_repaired(analysis: Analysis) -> tuple[str, int]:
    """Store the repaired file of `analysis` as a blob, streamed through a temporary file.

    Returns (sha256, size in bytes).
    """
    with tempfile.TemporaryFile() as f:
        analysis.write_repaired(f)
        return store_blob_file(f)


# Heads.

# The session fields that follow from its head: every head writer refreshes exactly these.
HEAD_FIELDS = (
    "head",
    "format",
    "record_count",
    "fault_counts",
    "error",
    "analysed",
    "last_write",
    "live_until",
)


@dataclass(frozen=True)
class HeadState:
    """What a session's row says about its head's bytes: format, counts, error, last write.

    `fault_counts` is {fault kind id: count}; `last_write` is when the
    session's source was last written (None when unknown), which decides
    `live_until`. `analysed` False: the bytes are stored but not read yet
    (`unread`), so the format may be "unknown" and the counts are empty.
    """

    format: str
    record_count: int
    fault_counts: dict[str, int]
    error: str
    last_write: datetime | None
    analysed: bool = True

    @classmethod
    def of(cls, analysis: Analysis, last_write: datetime | None) -> HeadState:
        """Return the state of a head whose bytes `analysis` read, last written at `last_write`."""
        return cls(
            analysis.format,
            analysis.record_count,
            analysis.fault_counts,
            analysis.error or "",
            last_write,
        )

    @classmethod
    def unread(cls, format: str | None) -> HeadState:
        """Return the state of a head stored without reading it (a large upload), not live.

        `format` is the format the uploader named, if any ("unknown" else).
        """
        return cls(format or "unknown", 0, {}, "", None, analysed=False)

    @classmethod
    def counted(
        cls, session: Session, analysis: Analysis, record_count: int, fault_counts: dict[str, int]
    ) -> HeadState:
        """Return `session`'s state with new counts: a job's head, same last write.

        The format is the one `analysis` (of the job's base) read the session as:
        the session's own, or the one sniffed if no one had read it yet.
        """
        return cls(analysis.format, record_count, fault_counts, session.error, session.last_write)


@dataclass(frozen=True)
class HeadMove:
    """`revision` to become `session`'s head with `state`, if the head is still `fence`."""

    session: Session
    revision: Revision
    state: HeadState
    fence: Revision | None


def write_heads(moves: Sequence[HeadMove]) -> list[bool]:
    """Make each move's revision its session's head, if the head is still its fence.

    The one head writer: a compare-and-set in the caller's transaction, one
    UPDATE of HEAD_FIELDS per session conditional on its head (None: it has
    none yet). Returns, per move, False when that head had moved (nothing
    written for it). The moved sessions' search entries go, in one statement
    (the search holds the old head's records until the new head's timeline
    is built); each `session` is updated in memory too.
    """
    moved = []
    for move in moves:
        values = {
            "head": move.revision,
            "format": move.state.format,
            "record_count": move.state.record_count,
            "fault_counts": move.state.fault_counts,
            "error": move.state.error,
            "analysed": move.state.analysed,
            "last_write": move.state.last_write,
            "live_until": live_until(move.state.last_write),
        }
        assert tuple(values) == HEAD_FIELDS
        session = move.session
        ok = bool(Session.objects.filter(pk=session.pk, head=move.fence).update(**values))
        if ok:
            for name, value in values.items():
                setattr(session, name, value)
        moved.append(ok)
    search.drop_sessions([m.session.pk for m, ok in zip(moves, moved, strict=True) if ok])
    return moved


def count_unread(session_id: int, revision_id: int, analysis: Analysis) -> bool:
    """Write what `analysis` read on a session stored unread whose head is still `revision_id`.

    Its format, record count, fault counts and error, and `analysed` True;
    nothing when another reader or a new head came first (returns False).
    Derived from the stored bytes, as a timeline is: no audit row.
    """
    return bool(
        Session.objects.filter(pk=session_id, head=revision_id, analysed=False).update(
            format=analysis.format,
            record_count=analysis.record_count,
            fault_counts=analysis.fault_counts,
            error=analysis.error or "",
            analysed=True,
        )
    )


def write_head(
    session: Session, revision: Revision, state: HeadState, *, fence: Revision | None
) -> bool:
    """Write one head, as `write_heads` does; return False when the head was not `fence`."""
    return write_heads([HeadMove(session, revision, state, fence)])[0]
