"""Timelines: made when a session page asks, built once (inline or by a task), pruned.

What a timeline holds is computed by `transcripts.timeline.build`; here it is
claimed, stored and indexed for the search.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import timedelta
from itertools import islice
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from transcripts import queue, search
from transcripts.actions.common import count_unread
from transcripts.engine import DEFAULT_POLICY, ENGINE_VERSION
from transcripts.models import Session, Timeline, TimelineRow
from transcripts.outages import outage_of
from transcripts.timeline import COLUMNS, Built, build

# Timelines kept per session head (policies × formats × live); the least recently used go first.
KEPT_PER_SESSION = 6
BUILD_BATCH = 2000


def timeline_for(session: Session, policy: str, read_as: str = "") -> Timeline:
    """Return the timeline of `session`'s head under `policy`, read as `read_as` ("" = its own).

    A missing timeline is created; a revision of at most TIMELINE_INLINE_BYTES
    is built now, a larger one is handed to a Celery task (again when a
    build's lease has passed: its worker died). The timeline returned may
    therefore still be queued or building. Raises queue.BrokerUnavailable
    when a build must be queued and the broker is down.
    """
    head = session.head
    assert head is not None
    timeline, created = _get_or_create(session, policy, read_as)
    now = timezone.now()
    if timeline.status == Timeline.Status.READY:
        if timeline.used_at < now - timedelta(hours=1):
            Timeline.objects.filter(pk=timeline.pk).update(used_at=now)
        return timeline
    if timeline.status == Timeline.Status.FAILED and not created:
        return timeline
    if head.size <= settings.TIMELINE_INLINE_BYTES:
        do_build_timeline(timeline.pk)
        timeline.refresh_from_db()
        return timeline
    lease = timedelta(seconds=settings.JOB_CLAIM_LEASE)
    if created or timeline.claimed_at is None or timeline.claimed_at < now - lease:
        _ask_build(timeline.pk)
    return timeline


def _get_or_create(session: Session, policy: str, read_as: str) -> tuple[Timeline, bool]:
    """Return the timeline of `session`'s head under `policy` and `read_as`, and if it is new."""
    return Timeline.objects.get_or_create(
        revision=session.head,
        policy=policy,
        read_as=read_as,
        live=session.is_live(),
        engine_version=ENGINE_VERSION,
    )


def _ask_build(timeline_id: int) -> None:
    """Send timeline `timeline_id`'s build to the workers once the transaction commits."""
    now = timezone.now()

    def asked() -> None:
        # Marked as asked for once sent, so that the polls in between do not send it again.
        Timeline.objects.filter(pk=timeline_id).update(claimed_at=now)

    queue.enqueue_on_commit(queue.BUILD_TIMELINE, timeline_id, sent=asked)


def unindexed(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Return those of `sessions` whose head the search has not indexed yet.

    A head is indexed when its timeline under the default policy, read as its
    own format, is built (`do_build_timeline`). Unreadable heads have nothing
    to index and are left out.
    """
    built = Timeline.objects.filter(
        revision=OuterRef("head"),
        policy=DEFAULT_POLICY,
        read_as="",
        status=Timeline.Status.READY,
        engine_version=ENGINE_VERSION,
    )
    return sessions.filter(head__isnull=False, error="").exclude(Exists(built))


def queue_index(sessions: Iterable[Session]) -> int:
    """Queue the default timeline build of each session's head on the workers; return how many.

    Derived data only (what the session page would build when opened), so no
    audit event. Raises queue.BrokerUnavailable when the broker is down.
    """
    queued = 0
    for session in sessions:
        if session.head_id is None:
            continue
        timeline, _ = _get_or_create(session, DEFAULT_POLICY, "")
        if timeline.status == Timeline.Status.QUEUED:
            _ask_build(timeline.pk)
            queued += 1
    return queued


def do_build_timeline(timeline_id: int) -> bool:
    """Build the rows of timeline `timeline_id`; return False when it was not this call's to build.

    A queued timeline, or one whose builder's lease has passed, is claimed with
    a conditional UPDATE; the rows and the READY status are written in one
    transaction that first checks the claim still holds, so two builders never
    both write rows. An engine error marks the timeline FAILED with its text;
    an outage (`outages.outage_of`: storage or database down, a blob unreadable)
    puts it back in the queue and is raised again, for the 503 page.
    A timeline is derived data (a cache of its revision's rows): no audit row.
    """
    token = uuid.uuid4()
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_CLAIM_LEASE)
    claimable = Q(status=Timeline.Status.QUEUED) | Q(
        status=Timeline.Status.BUILDING, claimed_at__lt=stale
    )
    if not Timeline.objects.filter(claimable, pk=timeline_id).update(
        status=Timeline.Status.BUILDING, claim=token, claimed_at=now
    ):
        return False
    timeline = Timeline.objects.select_related("revision__session").get(pk=timeline_id)

    def stage(number: int) -> None:
        # Committed at once (no transaction is open): the page polling for the build shows it.
        Timeline.objects.filter(pk=timeline_id, claim=token).update(stage=number)

    try:
        built = build(timeline, stage)
    except Exception as exc:
        if outage_of(exc) is not None:
            # A service down for a moment (storage, database) says nothing of the timeline:
            # queued again, it is built on the next visit or by the task retried.
            Timeline.objects.filter(pk=timeline_id, claim=token).update(
                status=Timeline.Status.QUEUED, claim=None, claimed_at=None, stage=0
            )
            raise
        # An engine bug shows on the page instead of a build retried forever.
        error = f"{type(exc).__name__}: {exc}"
        if (
            Timeline.objects.filter(pk=timeline_id, claim=token).update(
                status=Timeline.Status.FAILED, error=error
            )
            and _reads_head(timeline)
            and not isinstance(exc, MemoryError)
        ):
            # A session stored unread says why it has no counts, not "being read" forever.
            # Out of memory says nothing of the file: the lighter count still reads it.
            Session.objects.filter(
                pk=timeline.revision.session_id, head=timeline.revision_id, analysed=False
            ).update(error=f"{timeline.revision.session.name}: not read ({error})", analysed=True)
        return True
    with built, transaction.atomic(durable=True):
        if not Timeline.objects.filter(pk=timeline_id, claim=token).update(
            status=Timeline.Status.READY, used_at=now, **built.fields()
        ):
            return False  # another builder took the claim over; it writes the rows
        # Read back from the build's file a batch at a time, twice: no build holds all its rows.
        _insert(timeline_id, built.rows)
        session = timeline.revision.session
        if _reads_head(timeline):
            search.index_session(session.pk, built.search_entries())
            _count_head(session, timeline, built)
    _prune(timeline.revision.session)
    return True


def _reads_head(timeline: Timeline) -> bool:
    """Return True for the timeline that reads its session's head as ingest does.

    The head's, under the default policy, read as its own format: the one the
    search indexes and whose analysis fills in a session stored unread.
    """
    return (
        timeline.policy == DEFAULT_POLICY
        and not timeline.read_as
        and timeline.revision_id == timeline.revision.session.head_id
    )


def _count_head(session: Session, timeline: Timeline, built: Built) -> None:
    """Fill in the format, counts and error of `session`'s head if no one had read it yet.

    A large upload is stored unread (`actions.sessions.reads_later`) and
    counted by `do_count_session`; a page opened before that builds its
    default timeline, whose analysis is the one ingest would have made (the
    default preset, its own or the named format, not live): whichever reads
    it first fills it in (`common.count_unread`).
    """
    count_unread(session.pk, timeline.revision_id, built.analysis)


def _insert(timeline_id: int, rows: Iterable[tuple[Any, ...]]) -> None:
    """Insert the rows of a timeline, BUILD_BATCH at a time (one batch held at once).

    Plain `executemany`, not `bulk_create`: for the 50,000 rows of a long
    session the ORM's per-field preparation took ten times the insert itself.
    """
    quote = connection.ops.quote_name
    table = quote(TimelineRow._meta.db_table)
    columns = ", ".join(quote(_column(n)) for n in ("timeline", *COLUMNS))
    values = ", ".join(["%s"] * (len(COLUMNS) + 1))
    with connection.cursor() as cursor:
        read = iter(rows)
        while batch := [(timeline_id, *row) for row in islice(read, BUILD_BATCH)]:
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({values})", batch)


def _column(name: str) -> str:
    """Return the database column of TimelineRow's field `name`."""
    found = TimelineRow._meta.get_field(name)
    assert isinstance(found, models.Field)
    column: str | None = found.column
    assert column is not None
    return column


def _prune(session: Session) -> None:
    """Delete the session's timelines of old heads and all but the most recently used few."""
    timelines = Timeline.objects.filter(revision__session=session)
    timelines.exclude(revision=session.head_id).delete()
    keep = timelines.order_by("-used_at", "-pk").values_list("pk", flat=True)[:KEPT_PER_SESSION]
    timelines.exclude(pk__in=list(keep)).delete()
