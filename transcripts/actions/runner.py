"""The job runner: what the tasks call to fan a job out and to process a chunk of its items.

The kickoff fans the items out in chunks; a worker claims a chunk's items
with one conditional UPDATE under a token of its own (`claim`), processes
them with no row written (`process`), and writes their results in one
transaction (`_write`) that first locks the items still held under that
token and finishes them with another conditional UPDATE on it. Every task
may run twice (`acks_late`): a finished item is never claimed again, and a
claim whose worker died is taken over once its lease has passed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from transcripts import writeback
from transcripts.actions.common import (
    UNFINISHED,
    EventType,
    FenceLost,
    HeadMove,
    HeadState,
    audit,
    file_name_of,
    open_analysis,
    read_revision,
    repaired_put,
    revision_data,
    store_repaired,
    update_rows,
    write_heads,
)
from transcripts.core.model import FaultKind, Op, OpKind
from transcripts.core.policy import Policy
from transcripts.difftext import diff_lines
from transcripts.engine import ENGINE_VERSION, Analysis, analyze
from transcripts.models import (
    AuditLog,
    AuditRecord,
    BlobUnreadable,
    Job,
    JobItem,
    Revision,
    Session,
    SyncedFile,
    blob_chunks,
    blob_name,
)
from transcripts.outages import outage_of
from transcripts.policies import policy_for
from transcripts.sizes import binary_size

logger = structlog.get_logger(__name__)

# Ops that take bytes out of a record: the audit keeps that record's span and bytes.
REMOVING_OPS = {
    OpKind.DROP_RESULT,
    OpKind.MOVE_RESULT,
    OpKind.DROP_CALL,
    OpKind.DROP_RECORD,
    OpKind.RESULTS_FIRST,
    OpKind.RENAME_ID,
    OpKind.SPLIT_AFTER_CALL,
    OpKind.SPLIT_REPLY,
    OpKind.DROP_CONTENT,
    OpKind.RELINK,
}

# The job counter each finished item status adds to.
COUNTERS = {
    JobItem.Status.REPAIRED: "done",
    JobItem.Status.WOULD_REPAIR: "done",
    JobItem.Status.ROLLED_BACK: "done",
    JobItem.Status.EXPORTED: "done",
    JobItem.Status.UNCHANGED: "done",
    JobItem.Status.FENCE_LOST: "fence_lost",
    JobItem.Status.PENDING: "pending",
    JobItem.Status.FAILED: "failed",
}

# A dry run keeps this much of each session's diff: enough to judge the change.
DIFF_LINES = 60
DIFF_MAX_BYTES = 16 << 20  # a dry run diffs sessions up to this size (it reads them whole)
DIFF_LINE_CHARS = 300
# Seconds between two writes of a chunk's progress (`Progress`).
PROGRESS_INTERVAL = 0.5
# The job fields that say a chunk waits for a service (`note_outage`): cleared as the job
# progresses, by every UPDATE that counts items into the job row.
NOT_WAITING: dict[str, Any] = {"waiting_for": "", "waiting_error": "", "retry_at": None}
# How much of the outage's error the job row keeps for the page.
WAITING_ERROR_CHARS = 500


def do_fan_out_job(job_id: int) -> list[list[int]]:
    """Mark job `job_id` running and return its unfinished item ids in chunks.

    Chunks hold at most `settings.JOB_CHUNK_SIZE` items and, past their
    first, revisions of at most `settings.JOB_CHUNK_BYTES` together (see
    `chunked`). A job with nothing left to do is finished here; one
    cancelled, finished or gone gives no chunk. The kickoff is sent once
    the job's transaction has committed, so the job is there to be read.
    """
    with transaction.atomic(durable=True):
        started = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.RUNNING, started_at=timezone.now()
        )
        job = Job.objects.filter(pk=job_id).first()
        if job is None:
            return []
        if started:
            audit(
                EventType.JOB_STARTED,
                workspace_id=job.workspace_id,
                acting_user=None,
                on_behalf_of_id=job.created_by_id,
                job=job,
                extra_data={"items": job.total},
            )
    if job.status != Job.Status.RUNNING:
        return []
    sized = list(
        job.items.filter(status__in=UNFINISHED).order_by("pk").values_list("pk", _read_size(job))
    )
    if not sized:
        _maybe_finish(job_id)
    return chunked(sized)


def _read_size(job: Job) -> str:
    """Return the JobItem lookup of the size of the revision `job` reads for an item."""
    # A rollback restores each base's parent; the other kinds read the base.
    return "base__parent__size" if job.kind == Job.Kind.ROLLBACK else "base__size"


def chunked(sized: list[tuple[int, int | None]]) -> list[list[int]]:
    """Cut [(item pk, bytes to read)] into chunks of item pks, in order.

    A chunk takes at most settings.JOB_CHUNK_SIZE items, and no further
    item once its bytes together would pass settings.JOB_CHUNK_BYTES; an
    item larger than that gets a chunk of its own. So a chunk of small
    sessions shares its database round trips among many, and one of large
    sessions stays well inside the claim lease (JOB_CLAIM_LEASE). None
    bytes (no revision to read) count as 0.
    """
    size, cap = settings.JOB_CHUNK_SIZE, settings.JOB_CHUNK_BYTES
    chunks: list[list[int]] = []
    chunk: list[int] = []
    total = 0
    for pk, nbytes in sized:
        nbytes = nbytes or 0
        if chunk and (len(chunk) >= size or total + nbytes > cap):
            chunks.append(chunk)
            chunk, total = [], 0
        chunk.append(pk)
        total += nbytes
    if chunk:
        chunks.append(chunk)
    return chunks


def chunk_queues(job_id: int, chunks: list[list[int]]) -> list[tuple[list[int], str | None]]:
    """Return each chunk of job `job_id`'s item ids with the queue to send it to.

    None is the default queue. With settings.CELERY_SYNC_QUEUE set (sync
    folders live on one host), the items of a repair or rollback whose
    session's source writes back are regrouped into chunks of their own for
    that queue, whose worker has the folder; the rest keep the default.
    """
    queue = settings.CELERY_SYNC_QUEUE
    if not queue or not chunks:
        return [(chunk, None) for chunk in chunks]
    job = Job.objects.get(pk=job_id)
    if not job.writes:
        return [(chunk, None) for chunk in chunks]
    ids = [pk for chunk in chunks for pk in chunk]
    sized = dict(JobItem.objects.filter(pk__in=ids).values_list("pk", _read_size(job)))
    local = set(
        JobItem.objects.filter(
            pk__in=ids, session__synced_file__source__write_back=True
        ).values_list("pk", flat=True)
    )
    routed: list[tuple[list[int], str | None]] = []
    for group, to in (
        ([pk for pk in ids if pk in local], queue),
        ([pk for pk in ids if pk not in local], None),
    ):
        routed += [(chunk, to) for chunk in chunked([(pk, sized.get(pk)) for pk in group])]
    return routed


def do_run_job_items(job_id: int, item_ids: Iterable[int]) -> list[int]:
    """Claim the items of `item_ids` and process them; return those left unfinished.

    One conditional UPDATE claims every item of the chunk that is queued, or
    whose claim's lease has passed (its worker died), under one token. An
    item already finished, or cancelled, is skipped. The claimed items are
    processed, then written together (see `_write`). One another worker holds
    within its lease, or one this worker could not write (see `_write`), is
    returned, for a retry once the lease has passed. Finishes the job when
    no item is left.
    """
    job = Job.objects.select_related("created_by", "source_job").get(pk=job_id)
    item_ids = list(item_ids)
    claim = _claim(item_ids)
    # A rollback restores each base's parent; the other kinds read only the base.
    base = "base__parent" if job.kind == Job.Kind.ROLLBACK else "base"
    items = list(
        JobItem.objects.filter(pk__in=item_ids, claim=claim, status=JobItem.Status.RUNNING)
        .select_related("session__head", base)
        .order_by("pk")
    )
    written = _run_claimed(job, claim, items)
    busy = []
    if len(written) < len(item_ids):
        busy = list(
            JobItem.objects.filter(pk__in=item_ids, status=JobItem.Status.RUNNING)
            .exclude(pk__in=written)
            .values_list("pk", flat=True)
        )
    _maybe_finish(job_id)
    return busy


def _claim(item_ids: list[int]) -> uuid.UUID:
    """Claim the claimable items of `item_ids` for this worker; return the claim token."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_CLAIM_LEASE)
    token = uuid.uuid4()
    with transaction.atomic(durable=True):
        JobItem.objects.filter(
            Q(status=JobItem.Status.QUEUED)
            | Q(status=JobItem.Status.RUNNING, claimed_at__lt=stale),
            pk__in=item_ids,
        ).update(status=JobItem.Status.RUNNING, claim=token, claimed_at=now)
    return token


@dataclass
class NewHead:
    """A revision to become its session's head, if the head is still `fence`.

    `revision` holds the Revision's fields, `state` the session fields that
    go with the new head, `audit` the fields of each audit record (all of them
    from `fence` to the new revision), `event` the AuditLog event type.
    `write_back`, when set, replaces the session's source file in the same
    transaction with the bytes `content` yields (streamed from storage).
    """

    fence: Revision
    revision: dict[str, Any]
    state: HeadState
    audit: list[dict[str, Any]]
    event: str
    write_back: writeback.WriteBack | None = None
    content: Callable[[], Iterable[bytes]] | None = None


@dataclass
class Outcome:
    """What processing one job item came to: its status and fields, and a new head to write."""

    item: JobItem
    status: str
    fields: dict[str, Any] = field(default_factory=dict)
    head: NewHead | None = None


def _run_claimed(job: Job, claim: uuid.UUID, items: list[JobItem]) -> list[int]:
    """Process `items`, claimed under `claim`, and write their results; return the pks written.

    Processing (reading, repairing, storing blobs) writes no row; the
    results are written in one transaction (`_write`), once every blob
    they name is stored (on remote storage the blobs are read ahead and
    stored behind: `ChunkBlobs`). An outage (`outages.outage_of`, a blob
    unreadable aside) stops the chunk: the items from the one it hit on
    (its read, its processing or its store) are left claimed and
    unwritten, for a retry, and the job row says what it waits for
    (`note_outage`) once the items before it are written. A session whose
    source file is written back is written in a transaction of its own, as
    is each session again when another writer took a revision number under
    the chunk's transaction, so one session never costs the others their
    results. An item no longer ours (cancelled, or taken over) writes nothing.
    """
    # One query for the chunk: only these sessions' source files are checked for a write-back.
    writing_back = set()
    if job.writes:
        writing_back = set(
            SyncedFile.objects.filter(
                session__in=[item.session_id for item in items], source__write_back=True
            ).values_list("session_id", flat=True)
        )
    outcomes = []
    progress = Progress(job.pk)
    for item in items:
        # The same session, already loaded: reading the base needs its name and format.
        item.base.session = item.session
    blobs = ChunkBlobs(job, items)
    outage: BaseException | None = None
    try:
        for index, item in enumerate(items):
            if blobs.stopped():
                break
            blobs.read_ahead(index)
            try:
                process = PROCESSORS[Job.Kind(job.kind)]
                outcomes.append(process(item, job, item.session_id in writing_back, blobs))
            except Exception as exc:  # an engine or blob error must fail one item, not the job
                if _is_outage(exc):
                    # Storage or database down: this item and the rest stay claimed, unwritten,
                    # and are returned busy, for the task's retry once the lease has passed;
                    # processing on would wait out the outage once an item.
                    logger.warning("job_chunk_outage", job=job.pk, item=item.pk, error=str(exc))
                    outage = exc
                    break
                outcomes.append(Outcome(item, JobItem.Status.FAILED, _failure(exc)))
            progress.add(item.pk)
        # No row may name a blob before it is stored.
        outcomes = blobs.settle(outcomes)
    finally:
        blobs.close()
    alone: list[Outcome] = []
    together: list[Outcome] = []
    for outcome in outcomes:
        writes_back = outcome.head is not None and outcome.head.write_back is not None
        (alone if writes_back else together).append(outcome)
    try:
        written = _write(job, claim, together)
    except (IntegrityError, DataError):
        alone, written = outcomes, []
    for outcome in alone:
        written.extend(_write_alone(job, claim, outcome))
    # After the writes: they count items into the job row, which clears what it waits for.
    outage = outage or blobs.outage
    if outage is not None:
        note_outage(job.pk, outage)
    return written


def _is_outage(exc: BaseException) -> bool:
    """Return True when `exc` means a service is down: the chunk stops (a blob unreadable aside)."""
    return outage_of(exc) is not None and not isinstance(exc, BlobUnreadable)


def blob_window() -> int:
    """Return how many bases a chunk reads ahead on remote storage, and repairs stores behind.

    settings.JOB_BLOB_WINDOW: the item analysed counts among those read
    ahead; as many repairs may be on their way to storage at once, and a
    process has as many blob threads. Each base read ahead is held in
    memory whole (at most JOB_INLINE_BYTES).
    """
    return max(1, settings.JOB_BLOB_WINDOW)


def _failure(exc: BaseException) -> dict[str, Any]:
    """Return the fields of an item that `exc` failed: its error, and whether a retry is in vain.

    A blob unreadable (missing or damaged in storage) fails the same way
    on every retry: the item is marked `unreadable`, and not offered again.
    """
    return {"error": f"{type(exc).__name__}: {exc}", "unreadable": isinstance(exc, BlobUnreadable)}


def note_outage(job_id: int, exc: BaseException) -> None:
    """Record on job `job_id` that a chunk stopped on the outage `exc`, until it progresses.

    Sets the job's `waiting_for` (the service `outages.outage_of` names),
    `waiting_error` (the error, cut to WAITING_ERROR_CHARS) and `retry_at`
    (now plus settings.JOB_CLAIM_LEASE: when the task retries the chunk).
    The next UPDATE that counts items into the job row clears them
    (NOT_WAITING). A job no longer running is left alone. Raises
    DatabaseError when the database cannot take the row.
    """
    outage = outage_of(exc)
    if outage is None:
        return
    retry_at = timezone.now() + timedelta(seconds=settings.JOB_CLAIM_LEASE)
    Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        waiting_for=outage[0], waiting_error=str(exc)[:WAITING_ERROR_CHARS], retry_at=retry_at
    )


def note_database_outage(job_id: int, exc: DatabaseError) -> bool:
    """Record on job `job_id` that a chunk stopped on the database error `exc`, if it can.

    The chunk's task retries after the lease. The database may be back
    already (a restart, a statement cancelled): the connection `exc` broke
    is dropped and the note (`note_outage`) made on a new one. Return False
    when the database still cannot take it; that error is logged, not raised.
    """
    connection.close_if_unusable_or_obsolete()
    try:
        note_outage(job_id, exc)
    except DatabaseError as again:
        logger.warning("job_outage_not_noted", job=job_id, error=str(again))
        return False
    return True


# This process's blob I/O threads and the pid that made them (a forked child makes its own).
_blob_threads: tuple[int, ThreadPoolExecutor] | None = None


def _blob_pool() -> ThreadPoolExecutor:
    """Return this process's threads for blob I/O, made on first use.

    They live as long as the process, so each makes its storage client
    once (django-storages keeps one per thread, some 100 ms of CPU to
    make), not once a chunk. There are `blob_window()`, shared by the reads
    ahead and the stores behind in the order they were asked for: the
    read the next item waits for was asked for before the stores of the
    items between. A forked child has none of its parent's threads: it
    makes threads of its own.
    """
    global _blob_threads
    pid = os.getpid()
    if _blob_threads is None or _blob_threads[0] != pid:
        pool = ThreadPoolExecutor(blob_window(), thread_name_prefix="pairfix-blob")
        _blob_threads = (pid, pool)
    return _blob_threads[1]


class ChunkBlobs:
    """The blob I/O of one chunk's items: bases read ahead and repairs stored behind.

    On storage whose class says `remote_io` (S3: each request waits on the
    network), the blob threads (`_blob_pool`) read the bases of the next
    `blob_window()` items while one is analysed, and store each repair while
    the next items are; `settle` waits for every store before a row names
    its blob. Only a base read whole from one blob (`_read_whole`) is read
    ahead, and only the bytes of a repair are stored behind: the threads
    call the storage, never the database (its connections are per thread).
    On other storage each is read and stored when asked, in this thread.
    """

    def __init__(self, job: Job, items: list[JobItem]) -> None:
        remote = bool(getattr(default_storage, "remote_io", False))
        self.pool = _blob_pool() if remote else None
        self.items = items
        self.window = blob_window()
        self.ahead = 0  # the index of the next item whose base is to be read ahead
        self.reads: dict[int, Future[bytes]] = {}  # by item pk
        self.stores: dict[int, Future[object]] = {}  # by item pk, in the items' order
        self.wholes: dict[int, Revision] = {}
        self.outage: BaseException | None = None  # the outage a store stopped on (`settle`)
        if remote:
            self.wholes = _read_whole(job, items)

    def read_ahead(self, index: int) -> None:
        """Read the bases of items `index` to `index + self.window - 1` ahead, if not yet.

        A base read for an item before `index` that its processing did
        not take is let go (its read cancelled if it has not started).
        """
        if self.pool is None:
            return
        if index and (untaken := self.reads.pop(self.items[index - 1].pk, None)):
            untaken.cancel()
        while self.ahead < min(index + self.window, len(self.items)):
            item = self.items[self.ahead]
            if item.pk in self.wholes:
                self.reads[item.pk] = self.pool.submit(read_revision, self.wholes[item.pk])
            self.ahead += 1

    def base(self, item: JobItem) -> bytes | None:
        """Return the bytes of `item`'s base read ahead, or None if none were.

        Raises what `read_revision` raised reading them.
        """
        future = self.reads.pop(item.pk, None)
        return None if future is None else future.result()

    def store(self, item: JobItem, analysis: Analysis, *, stored: str = "") -> tuple[str, int]:
        """Store `item`'s repair as `store_repaired` does; return (sha256, size in bytes).

        On remote storage the bytes of an analysis of bytes are hashed
        here and stored by a blob thread, at most `self.window` at once
        (this waits for one to finish first); its errors come out of
        `settle`. Others are stored here, at once.
        """
        if self.pool is None or not isinstance(analysis.raw, bytes):
            return store_repaired(analysis, stored=stored)
        sha256, put = repaired_put(analysis.repaired, stored=stored)
        if put is not None:
            while len(running := [f for f in self.stores.values() if not f.done()]) >= self.window:
                wait(running, return_when=FIRST_COMPLETED)
            self.stores[item.pk] = self.pool.submit(put)
        return sha256, len(analysis.repaired)

    def stopped(self) -> bool:
        """Return True when a store has failed because storage is down: the chunk stops."""
        errors = [f.exception() for f in self.stores.values() if f.done()]
        return any(exc is not None and _is_outage(exc) for exc in errors)

    def settle(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Wait for every store; return `outcomes` less those they cost.

        An item whose repair could not be stored fails, with the error; one
        whose store found storage down is cut off with every later item
        (they stay claimed and unwritten, as an outage leaves them), and
        that error kept in `outage`.
        """
        wait(self.stores.values())
        settled = []
        for outcome in outcomes:
            future = self.stores.get(outcome.item.pk)
            exc = None if future is None else future.exception()
            if exc is None:
                settled.append(outcome)
            elif _is_outage(exc):
                item = outcome.item
                logger.warning("job_chunk_outage", job=item.job_id, item=item.pk, error=str(exc))
                self.outage = exc
                break
            else:
                settled.append(Outcome(outcome.item, JobItem.Status.FAILED, _failure(exc)))
        return settled

    def close(self) -> None:
        """Cancel the reads ahead not started and wait for the rest: none outlives the chunk."""
        for future in self.reads.values():
            future.cancel()
        wait(self.reads.values())
        wait(self.stores.values())
        self.reads.clear()


def _read_whole(job: Job, items: list[JobItem]) -> dict[int, Revision]:
    """Return {item pk: revision} of the items whose processing reads a revision whole.

    That is what `read_revision` reads in one GET: at most
    settings.JOB_INLINE_BYTES, not a chain of appended deltas. A repair, a
    dry run and an export read the item's base (a repair or dry run not
    when its fence is lost or the base is `left_as_found`), a rollback the
    base's parent (not when the head moved). An unknown policy reads
    nothing ahead: each item fails on it.
    """
    kind = Job.Kind(job.kind)
    try:
        policy = policy_for(job.policy, job.workspace_id) if kind != Job.Kind.ROLLBACK else None
    except KeyError:
        return {}
    wholes = {}
    for item in items:
        fenced = item.session.head_id == item.base_id
        revision: Revision | None = item.base
        if kind == Job.Kind.ROLLBACK:
            revision = item.base.parent if fenced else None
        elif kind != Job.Kind.EXPORT:
            assert policy is not None
            if not fenced or left_as_found(item.session, item.base, policy):
                revision = None
        if (
            revision is not None
            and revision.size <= settings.JOB_INLINE_BYTES
            and revision.appended_to_id is None
        ):
            wholes[item.pk] = revision
    return wholes


class Progress:
    """Count the items processed into the job row, before their chunk is written.

    The bar moves as sessions are processed, not only when a chunk is
    written; but one UPDATE (and commit) per session cost more than many a
    session's repair, so this process writes a job's count at most every
    PROGRESS_INTERVAL seconds: the first of a job at once, the rest once
    that long has passed since its last count here, a chunk's write
    included (`_write` counts its items too, and calls `written`). Each item
    is counted once (`JobItem.counted`): a chunk taken over from a worker
    that died after counting it adds only the items it had not. Each write
    clears what the job waited for (NOT_WAITING): its chunks are moving.
    """

    # (job id, time.monotonic()) of the last count this process wrote.
    last: tuple[int, float] | None = None

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.unwritten: list[int] = []

    def add(self, item_id: int) -> None:
        """Count item `item_id` processed; write the count if the last write is old enough."""
        self.unwritten.append(item_id)
        now = time.monotonic()
        last = Progress.last
        if last is None or last[0] != self.job_id or now - last[1] >= PROGRESS_INTERVAL:
            self.flush(now)

    def flush(self, now: float) -> None:
        """Write the items counted since the last write, less those counted already."""
        if self.unwritten:
            with transaction.atomic(durable=True):
                # An item a cancel has locked is left uncounted (it is being cancelled):
                # waiting for it could deadlock, as a cancel locks items in no order.
                new = list(
                    JobItem.objects.select_for_update(skip_locked=True)
                    .filter(pk__in=self.unwritten, counted=False)
                    .values_list("pk", flat=True)
                )
                job = Job.objects.filter(pk=self.job_id)
                if new:
                    JobItem.objects.filter(pk__in=new).update(counted=True)
                    job.update(processed=F("processed") + len(new), **NOT_WAITING)
                else:
                    # A chunk retried after an outage counted these before it stopped:
                    # it has resumed all the same.
                    job.exclude(waiting_for="").update(**NOT_WAITING)
            self.unwritten = []
        Progress.written(self.job_id, now)

    @staticmethod
    def written(job_id: int, now: float | None = None) -> None:
        """Note that job `job_id`'s count was written now (`now`, time.monotonic())."""
        Progress.last = (job_id, time.monotonic() if now is None else now)


def _write_alone(job: Job, claim: uuid.UUID, outcome: Outcome) -> list[int]:
    """Write one outcome in its own transaction; one that cannot be written costs only itself.

    A refused write-back, or another writer that took the session's next
    revision, makes it fence_lost; a row the database refuses (IntegrityError,
    DataError) makes it failed, with the database's reason. Any other
    database error (the server gone) is raised: the task is retried.
    """
    try:
        return _write(job, claim, [outcome])
    except (writeback.WriteBackRefused, OSError) as exc:
        status, error = JobItem.Status.FENCE_LOST, str(exc)
    except (IntegrityError, DataError) as exc:
        assert outcome.head is not None
        fence = outcome.head.fence
        taken = Revision.objects.filter(session=outcome.item.session_id, number=fence.number + 1)
        if taken.exists():
            status = JobItem.Status.FENCE_LOST
            error = f"another writer took revision {fence.number + 1} of the session"
        else:
            status = JobItem.Status.FAILED
            error = f"the database refused the session's new revision: {exc}".strip()
    return _write(job, claim, [Outcome(outcome.item, status, {"error": error})])


SESSION_DELETED = "the session was deleted"


def _write(job: Job, claim: uuid.UUID, outcomes: list[Outcome]) -> list[int]:
    """Write `outcomes` in one transaction; return the pks of the items written.

    First the items still held under `claim` are locked: a cancel, or a
    worker taking them over, waits for this transaction and then finds them
    finished. One that such a transaction has locked already is passed over
    (it is cancelled or taken over, or else retried once its lease has
    passed): waiting for it could deadlock, as those lock items in no
    particular order. Then the sessions that get a new head are locked, in
    pk order so that two workers never wait for each other in a circle: a
    session whose head is no longer its item's fence is finished as
    fence_lost and written nothing, one deleted meanwhile as failed
    (SESSION_DELETED). Each other one gets its revision, its
    head moved by a compare-and-set on the fence, its audit records and its
    write-back; then every item is finished and counted, the job row last.
    Raises IntegrityError when another writer took a revision number
    meanwhile (nothing is written), and WriteBackRefused or OSError from a
    write-back (keep such an outcome alone).
    """
    if not outcomes:
        return []
    by_pk = {outcome.item.pk: outcome for outcome in outcomes}
    running = {"claim": claim, "status": JobItem.Status.RUNNING}
    held = JobItem.objects.filter(**running)
    with transaction.atomic(durable=True):
        ours = held.select_for_update(skip_locked=True).filter(pk__in=by_pk).order_by("pk")
        counted = dict(ours.values_list("pk", "counted"))
        kept = [by_pk[pk] for pk in counted]
        if not kept:
            return []
        results = {o.item.pk: (o.status, dict(o.fields)) for o in kept}
        moving = [o for o in kept if o.head is not None]
        if moving:
            heads = dict(
                Session.objects.select_for_update()
                .filter(pk__in=[o.item.session_id for o in moving])
                .order_by("pk")
                .values_list("pk", "head_id")
            )
            fenced = []
            for o in moving:
                assert o.head is not None
                if o.item.session_id not in heads:
                    # Deleted since the job was made (the manager hides it): nothing to write.
                    results[o.item.pk] = (JobItem.Status.FAILED, {"error": SESSION_DELETED})
                    continue
                if heads[o.item.session_id] == o.head.fence.pk:
                    fenced.append(o)
                    continue
                # Every writer writes the revision after the head it read.
                error = f"another writer took revision {o.head.fence.number + 1} of the session"
                results[o.item.pk] = (JobItem.Status.FENCE_LOST, {"error": error})
            moving = fenced
            revisions = _write_heads(job, moving)
            for o, revision in zip(moving, revisions, strict=True):
                results[o.item.pk][1]["revision"] = revision
        # Each item finished and counted; items of the same fields in one statement.
        finished = update_rows(
            JobItem,
            [
                ({"status": status, "counted": True, **fields}, {"id": pk, **running})
                for pk, (status, fields) in results.items()
            ],
        )
        assert finished == len(kept), "the locked items are ours until this transaction ends"
        counts = Counter(COUNTERS[JobItem.Status(status)] for status, _ in results.values())
        counts["processed"] = sum(not was for was in counted.values())
        # Last in the transaction: the job row is the one row every worker writes.
        Job.objects.filter(pk=job.pk).update(
            **{c: F(c) + n for c, n in counts.items() if n}, **NOT_WAITING
        )
    Progress.written(job.pk)
    return [o.item.pk for o in kept]


def _write_heads(job: Job, outcomes: list[Outcome]) -> list[Revision]:
    """Write each outcome's new head: revision, session head (`write_head`), audit, write-back.

    The sessions are locked and still at their fences. Return the revisions.
    """
    if not outcomes:
        return []
    heads = [o.head for o in outcomes if o.head is not None]
    revisions = Revision.objects.bulk_create(Revision(**head.revision) for head in heads)
    moved = write_heads(
        [
            HeadMove(o.item.session, revision, head.state, head.fence)
            for o, head, revision in zip(outcomes, heads, revisions, strict=True)
        ]
    )
    assert all(moved), "the locked sessions are at their fences"
    AuditRecord.objects.bulk_create(
        AuditRecord(**fields, revision_to=revision)
        for head, revision in zip(heads, revisions, strict=True)
        for fields in head.audit
    )
    AuditLog.objects.bulk_create(
        AuditLog(
            event_type=head.event,
            workspace_id=job.workspace_id,
            on_behalf_of_id=job.created_by_id,
            job=job,
            session_id=o.item.session_id,
            revision=revision,
            extra_data={"from": head.fence.number, "to": revision.number, "ops": len(head.audit)},
        )
        for o, head, revision in zip(outcomes, heads, revisions, strict=True)
    )
    for o, head, revision in zip(outcomes, heads, revisions, strict=True):
        if head.write_back is not None:
            revision.session = o.item.session
            assert head.content is not None
            _write_back(head.write_back, head.content, job, head.fence, revision)
    return revisions


def _check_fence(item: JobItem) -> None:
    head = item.session.head
    assert head is not None
    if head.pk != item.base_id:
        raise FenceLost(
            f"the session's head moved from revision {item.base.number} to revision "
            f"{head.number} since the job was created"
        )


def _repair_item(item: JobItem, job: Job, writes_back: bool, blobs: ChunkBlobs) -> Outcome:
    """Repair (or, in a dry run, plan) one session from its fenced head.

    A non-empty plan becomes revision n+1, fenced on `item.base`, with one
    audit record per op, and replaces the source file if `writes_back` (its
    source writes back and the file checks out); a dry run keeps the plan's
    diff instead.
    """
    session, base = item.session, item.base
    try:
        _check_fence(item)
    except FenceLost as exc:
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": str(exc)})
    policy = policy_for(job.policy, job.workspace_id)
    if left_as_found(session, base, policy):
        return Outcome(item, JobItem.Status.UNCHANGED)
    last_write = None if job.force else session.last_write
    with open_analysis(
        base,
        policy,
        last_write=last_write,
        inline_bytes=settings.JOB_INLINE_BYTES,
        data=blobs.base(item),
    ) as analysis:
        return _repair_analysed(item, job, writes_back, analysis, blobs)


def left_as_found(session: Session, head: Revision, policy: Policy) -> bool:
    """Return True when `session`'s row shows that `policy` would leave its head as found.

    That is a head (`head`, the session's head) read by this ENGINE_VERSION
    with no fault of any kind and no error: the engine plans nothing for a
    transcript without faults, so a repair or dry run need not read it again.
    Not for a policy that replays aborted frames: it finds a fault (an
    interrupted frame without calls) that the counts, read without it, may
    not hold. (With it, the counts hold every fault read without it.)
    """
    return (
        not policy.replays_aborted
        and session.analysed
        and not session.error
        and not session.fault_counts
        and session.format != "unknown"
        and session.head_id == head.pk
        and head.engine_version == ENGINE_VERSION
    )


def _repair_analysed(
    item: JobItem, job: Job, writes_back: bool, analysis: Analysis, blobs: ChunkBlobs
) -> Outcome:
    """The rest of `_repair_item`, once the fenced head is analysed (its source open)."""
    session, base = item.session, item.base
    if analysis.error:
        return Outcome(item, JobItem.Status.FAILED, {"error": analysis.error})
    pending = analysis.fault_counts.get(FaultKind.PENDING_RESULT, 0)
    if pending:
        assert session.last_write is not None
        error = (
            f"{pending} pending result(s): the session was last written at "
            f"{session.last_write:%Y-%m-%d %H:%M:%S %Z} and may still be running; "
            "a forced job repairs it anyway"
        )
        return Outcome(item, JobItem.Status.PENDING, {"error": error})
    ops = analysis.plan.ops
    if not ops:
        return Outcome(item, JobItem.Status.UNCHANGED)
    plan_fields: dict[str, Any] = {
        "op_count": len(ops),
        "op_counts": dict(Counter(str(op.kind) for op in ops)),
    }
    if job.kind == Job.Kind.DRY_RUN:
        if base.size > DIFF_MAX_BYTES:
            diff = (
                f"(no diff: the session is {binary_size(base.size)}, "
                f"over {binary_size(DIFF_MAX_BYTES)})"
            )
        else:
            raw = analysis.raw if isinstance(analysis.raw, bytes) else base.read()
            diff = _diff(raw, analysis.repaired, session.name)
        return Outcome(item, JobItem.Status.WOULD_REPAIR, {"diff": diff, **plan_fields})
    try:
        write_back = writeback.check(session, base) if writes_back else None
    except writeback.WriteBackRefused as exc:
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": str(exc)})
    # The new head's own faults, for the session list.
    record_count, fault_counts = analysis.repaired_counts()
    sha256, size = blobs.store(item, analysis)
    revision = {
        "session": session,
        "number": base.number + 1,
        "sha256": sha256,
        "size": size,
        "policy": job.policy,
        "engine_version": ENGINE_VERSION,
        "origin": Revision.Origin.REPAIR,
        "parent": base,
        "created_by": job.created_by,
    }
    head = NewHead(
        base,
        revision,
        HeadState.counted(session, analysis, record_count, fault_counts),
        [_op_audit_fields(op, analysis, job=job, base=base) for op in ops],
        EventType.SESSION_REPAIRED,
        write_back,
        functools.partial(blob_chunks, sha256),
    )
    return Outcome(item, JobItem.Status.REPAIRED, plan_fields, head)


def _write_back(
    write_back: writeback.WriteBack,
    content: Callable[[], Iterable[bytes]],
    job: Job,
    base: Revision,
    revision: Revision,
) -> None:
    """Replace the session's source file with `revision` (`content`) and audit it; see writeback."""
    backup = write_back.replace(content, revision, now=timezone.now())
    write_back.synced.save()
    AuditRecord.objects.create(
        job=job,
        acting_user=job.created_by,
        session=revision.session,
        revision_from=base,
        revision_to=revision,
        op=AuditRecord.Action.WRITE_BACK,
        policy=job.policy,
        engine_version=ENGINE_VERSION,
        note=f"wrote {write_back.path} ({revision.size} bytes); the file before is {backup}",
    )
    audit(
        EventType.SESSION_WRITTEN_BACK,
        workspace_id=job.workspace_id,
        acting_user=None,
        on_behalf_of_id=job.created_by_id,
        job=job,
        session=revision.session,
        source_id=write_back.synced.source_id,
        revision=revision,
        extra_data={"path": str(write_back.path), "backup": str(backup), "size": revision.size},
    )


def _rollback_item(item: JobItem, job: Job, writes_back: bool, blobs: ChunkBlobs) -> Outcome:
    """Make the revision before the one `job.source_job` wrote the session's head again.

    The restored bytes become a new revision (n+1, same blob), audited, and
    replace the source file if `writes_back`; a session whose head is no
    longer the job's revision is reported, not touched.
    """
    session, undone = item.session, item.base
    previous = undone.parent
    assert job.source_job is not None and previous is not None and session.head is not None
    if session.head.pk != undone.pk:
        error = (
            f"the session changed since job {job.source_job.pk}: its head is revision "
            f"{session.head.number}, not the job's revision {undone.number}"
        )
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": error})
    with revision_data(previous, settings.JOB_INLINE_BYTES, blobs.base(item)) as data:
        restored = analyze(data, session.name, format=session.format, summaries=False)
    try:
        write_back = writeback.check(session, undone) if writes_back else None
    except writeback.WriteBackRefused as exc:
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": str(exc)})
    revision = {
        "session": session,
        "number": undone.number + 1,
        **previous.storage_fields(),
        "engine_version": ENGINE_VERSION,
        "origin": Revision.Origin.ROLLBACK,
        "parent": undone,
        "created_by": job.created_by,
    }
    audit_fields = {
        "job": job,
        "acting_user": job.created_by,
        "session": session,
        "revision_from": undone,
        "op": AuditRecord.Action.ROLLBACK,
        "policy": job.policy,
        "engine_version": ENGINE_VERSION,
    }
    head = NewHead(
        undone,
        revision,
        HeadState.counted(session, restored, restored.record_count, restored.fault_counts),
        [audit_fields],
        EventType.SESSION_ROLLED_BACK,
        write_back,
        previous.chunks,
    )
    return Outcome(item, JobItem.Status.ROLLED_BACK, {}, head)


def _export_item(item: JobItem, job: Job, writes_back: bool, blobs: ChunkBlobs) -> Outcome:
    """Repair one session's fenced head under the job's policy into a blob for the archive.

    Nothing is written to the session or its source file; as the
    single-session download does, the export ignores whether the session is live.
    """
    with open_analysis(
        item.base, job.policy, inline_bytes=settings.JOB_INLINE_BYTES, data=blobs.base(item)
    ) as analysis:
        if analysis.error:
            return Outcome(item, JobItem.Status.FAILED, {"error": analysis.error})
        # Stored even when unchanged: a revision made by an append may keep only its delta.
        base = item.base
        sha256_after, _ = blobs.store(
            item, analysis, stored=base.sha256 if base.appended_to_id is None else ""
        )
    ops = analysis.plan.ops
    fields = {
        "sha256_after": sha256_after,
        "op_count": len(ops),
        "op_counts": dict(Counter(str(op.kind) for op in ops)),
        "ops": [
            {
                "op": str(op.kind),
                "fault_kind": str(op.fault.kind),
                "tool_call_id": op.tool_call_id,
                # As `pairfix check --json` names it: for an insert, the record it follows.
                "record": op.place,
                "policy_row": op.policy_row,
            }
            for op in ops
        ],
    }
    return Outcome(item, JobItem.Status.EXPORTED, fields)


PROCESSORS = {
    Job.Kind.REPAIR: _repair_item,
    Job.Kind.DRY_RUN: _repair_item,
    Job.Kind.ROLLBACK: _rollback_item,
    Job.Kind.EXPORT: _export_item,
}


def _maybe_finish(job_id: int) -> None:
    """Mark the job done once no item is left; for an export, build its archive first.

    Two workers may both get here at the end: the conditional UPDATE lets one
    win, and the loser throws its archive away.
    """
    if JobItem.objects.filter(job_id=job_id, status__in=UNFINISHED).exists():
        return
    job = Job.objects.get(pk=job_id)
    if job.status != Job.Status.RUNNING:
        return
    archive = _build_archive(job) if job.kind == Job.Kind.EXPORT else ""
    previous = job.archive
    with transaction.atomic(durable=True):
        won = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
            status=Job.Status.DONE,
            finished_at=timezone.now(),
            archive=archive or job.archive,
            **NOT_WAITING,
        )
        if won:
            job.refresh_from_db()
            audit(
                EventType.JOB_FINISHED,
                workspace_id=job.workspace_id,
                acting_user=None,
                on_behalf_of_id=job.created_by_id,
                job=job,
                extra_data={
                    "done": job.done,
                    "failed": job.failed,
                    "fence_lost": job.fence_lost,
                    "pending": job.pending,
                },
            )
    # The loser's archive, or the one a retry of failed items replaced.
    stale = previous if won else archive
    if archive and stale:
        default_storage.delete(stale)


def _archive_path(item: JobItem) -> str:
    return f"sessions/{item.session_id}/{file_name_of(item.session.name)}"


def _build_archive(job: Job) -> str:
    """Write the zip of the export job `job` to storage; return its storage name.

    It holds each exported session's repaired file under
    `sessions/<session id>/<name>` and `manifest.json`: per session its
    format, the revision exported, sha256 before and after, the ops applied
    and, for a session that could not be read, the error.
    """
    items = (
        job.items.filter(status__in=[JobItem.Status.EXPORTED, JobItem.Status.FAILED])
        .select_related("session", "base")
        .order_by("session_id")
    )
    manifest: dict[str, Any] = {
        "job": job.pk,
        "policy": job.policy,
        "engine_version": ENGINE_VERSION,
        "created_at": timezone.now().isoformat(),
        "sessions": [],
    }
    with tempfile.TemporaryFile() as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as archive:
            for item in items.iterator(chunk_size=500):
                entry: dict[str, Any] = {
                    "session": item.session_id,
                    "name": item.session.name,
                    "format": item.session.format,
                    "revision": item.base.number,
                    "sha256_before": item.base.sha256,
                    "sha256_after": item.sha256_after or None,
                    "ops_applied": item.ops,
                    "path": None,
                    "error": item.error or None,
                }
                if item.status == JobItem.Status.EXPORTED:
                    entry["path"] = _archive_path(item)
                    with (
                        default_storage.open(blob_name(item.sha256_after), "rb") as blob,
                        archive.open(entry["path"], "w") as member,
                    ):
                        shutil.copyfileobj(blob, member)
                manifest["sessions"].append(entry)
            archive.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
        f.seek(0)
        return default_storage.save(f"exports/job-{job.pk}-{uuid.uuid4().hex}.zip", File(f))


def _diff(before: bytes, after: bytes, name: str) -> str:
    """Return the unified diff of two revisions as text, cut to DIFF_LINES lines.

    A long line shows the part where it changed (`difftext.cut_line`).
    """
    kept = []
    for n, line in enumerate(diff_lines(before, after, name, DIFF_LINE_CHARS)):
        if n == DIFF_LINES:
            kept.append("…")
            break
        kept.append(line)
    return "\n".join(kept)


def _op_audit_fields(op: Op, analysis: Analysis, *, job: Job, base: Revision) -> dict[str, Any]:
    """Return the fields of the audit record of `op`, but its `revision_to`."""
    start = end = removed = None
    transcript = analysis.transcript
    if op.kind in REMOVING_OPS and op.record is not None and transcript is not None:
        record = transcript.records[op.record]
        start, end, removed = record.start, record.end, transcript.raw[record.start : record.end]
    return {
        "job": job,
        "acting_user": job.created_by,
        "session": base.session,
        "revision_from": base,
        "op": str(op.kind),
        "fault_kind": str(op.fault.kind),
        "tool_call_id": op.tool_call_id or "",
        "record": op.record if op.record is not None else op.fault.record,
        "block": op.block,
        "anchor": op.anchor,
        "target": op.target,
        "policy": job.policy,
        "policy_row": op.policy_row,
        "engine_version": ENGINE_VERSION,
        "span_start": start,
        "span_end": end,
        "removed_bytes": removed,
        "note": _op_note(op),
    }


def _op_note(op: Op) -> str:
    """Return what an op does beyond its kind: the new id of a rename, the blocks a split takes."""
    if op.kind is OpKind.RENAME_ID:
        return f"tool call id {op.tool_call_id} -> {op.text}"
    if op.blocks:
        return f"blocks {', '.join(map(str, op.blocks))} of record {op.record}"
    return ""


def jobs_to_kick(now: datetime | None = None) -> list[int]:
    """Return the ids of the jobs whose work was lost on the way, for the sweep to kick again.

    A job still queued settings.JOB_SWEEP_AFTER seconds after it was made
    (or retried) lost its kickoff; a running one with an item claimed more
    than twice JOB_CLAIM_LEASE ago lost the retry that should have taken it
    over; a running one fanned out more than JOB_SWEEP_AFTER ago with an
    item still queued, and no item claimed in that time, lost a chunk's
    message (its send failed after the fan-out committed, or the broker
    dropped it). Kicking a job twice is harmless: a finished item is never
    claimed again, and a claim within its lease is not taken over.
    """
    now = now or timezone.now()
    queued_since = now - timedelta(seconds=settings.JOB_SWEEP_AFTER)
    stale = now - timedelta(seconds=2 * settings.JOB_CLAIM_LEASE)
    lost_kickoff = Job.objects.filter(status=Job.Status.QUEUED, created_at__lt=queued_since)
    lost_retry = Job.objects.filter(
        status=Job.Status.RUNNING,
        items__status=JobItem.Status.RUNNING,
        items__claimed_at__lt=stale,
    )
    # A job whose workers are still claiming its chunks is not sent them again:
    # its queued items wait behind the chunks in hand, not for a lost message.
    claiming = JobItem.objects.filter(job=OuterRef("pk"), claimed_at__gte=queued_since)
    lost_chunk = Job.objects.filter(
        ~Exists(claiming),
        status=Job.Status.RUNNING,
        started_at__lt=queued_since,
        items__status=JobItem.Status.QUEUED,
    )
    ids = set(lost_kickoff.values_list("pk", flat=True))
    ids.update(lost_retry.values_list("pk", flat=True))
    ids.update(lost_chunk.values_list("pk", flat=True))
    return sorted(ids)
