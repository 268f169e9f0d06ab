"""Every write Pairfix makes: one `do_*` function per state change.

Each runs in `transaction.atomic(durable=True)`, takes the acting user as a
keyword-only argument (None for the command line) and writes its audit rows in
the same transaction.

Jobs. Starting one creates the job and its items and sends the kickoff task in
one transaction: the task is published before the commit, so a broker that is
down rolls everything back (`BrokerUnavailable`) instead of leaving a job that
never runs; the kickoff retries while the job's rows are not yet visible to
the worker. The kickoff fans the items out in chunks; a worker claims a
chunk's items with one conditional UPDATE under a token of its own,
processes them, and writes their results in one transaction that first
locks the items still held under that token and finishes them with another
conditional UPDATE on it. Every task may run twice (`acks_late`): a finished
item is never claimed again, and a claim whose worker died is taken over
once its lease has passed.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import Task
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import DatabaseError, DataError, IntegrityError, transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Greatest
from django.utils import timezone
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from transcripts import search, writeback
from transcripts.core.model import FaultKind, Op, OpKind
from transcripts.engine import ENGINE_VERSION, Analysis, analyze
from transcripts.models import (
    ApiToken,
    AuditRecord,
    Job,
    JobItem,
    Membership,
    Revision,
    Session,
    SyncedFile,
    Timeline,
    Workspace,
    WorkspacePolicy,
    blob_chunks,
    blob_name,
    hash_token,
    store_blob,
    store_blob_file,
)
from transcripts.policies import policy_for
from transcripts.uploads import Staged, printable_name, store

logger = logging.getLogger(__name__)

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
UNFINISHED = (JobItem.Status.QUEUED, JobItem.Status.RUNNING)

# How precisely a token's `last_used` is kept: a busy token writes once a minute.
TOKEN_USE_RESOLUTION = timedelta(minutes=1)

# A dry run keeps this much of each session's diff: enough to judge the change.
DIFF_LINES = 60
DIFF_MAX_BYTES = 16 << 20  # a dry run diffs sessions up to this size (it reads them whole)
DIFF_LINE_CHARS = 300


class FenceLost(Exception):
    """The session's head moved away from the revision the job started from."""


class BrokerUnavailable(Exception):
    """The task queue could not be reached, so nothing was started."""


class JobStateError(Exception):
    """The job is not in a state that allows what was asked (the message says why)."""


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


def do_create_workspace(name: str, *, acting_user: Any) -> Workspace:
    """Create the workspace `name`, owned by `acting_user` unless that is None (the CLI)."""
    with transaction.atomic(durable=True):
        workspace = Workspace.objects.create(name=name)
        if acting_user is not None:
            Membership.objects.create(
                user=acting_user, workspace=workspace, role=Membership.Role.ADMIN
            )
    return workspace


def do_add_member(workspace: Workspace, user: Any, *, role: str) -> Membership:
    """Make `user` a member of `workspace` with `role`; an existing membership keeps its role."""
    with transaction.atomic(durable=True):
        membership, _ = Membership.objects.get_or_create(
            user=user, workspace=workspace, defaults={"role": role}
        )
    return membership


class LastAdmin(Exception):
    """The change would leave a workspace without an admin."""


def do_set_member_role(
    workspace: Workspace, user: Any, role: str | None, *, acting_user: Any
) -> Membership | None:
    """Give `user` `role` in `workspace` (adding them if needed); None removes them.

    Raises LastAdmin rather than leave the workspace with no admin. The rows
    are locked, so two admins demoting each other at once cannot both succeed.
    """
    with transaction.atomic(durable=True):
        admins = list(
            Membership.objects.select_for_update()
            .filter(workspace=workspace, role=Membership.Role.ADMIN)
            .values_list("user_id", flat=True)
        )
        if admins == [user.pk] and role != Membership.Role.ADMIN:
            raise LastAdmin(
                f"{user} is the only admin of {workspace}: make someone else admin first"
            )
        if role is None:
            Membership.objects.filter(workspace=workspace, user=user).delete()
            membership = None
        else:
            membership, _ = Membership.objects.update_or_create(
                user=user, workspace=workspace, defaults={"role": role}
            )
    logger.info(
        "membership changed",
        extra={"workspace": workspace.pk, "user": user.pk, "role": role, "by": acting_user.pk},
    )
    return membership


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


def create_session(
    workspace: Workspace,
    name: str,
    data: bytes | Staged,
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    origin: str = "upload",
    present: set[str] | None = None,
    **fields: Any,
) -> Session:
    """Store `data` as revision 0 of a new session; the caller holds the transaction.

    See `do_ingest_session`; `present` as for `store_blob`; `fields` are
    further Session fields (source, parent).
    """
    name = printable_name(name)
    name = fit_name(name, Session._meta.get_field("name").max_length or len(name))
    if isinstance(data, Staged):
        # Read from its file and copied to storage a chunk at a time: never whole in memory.
        with data.source() as source:
            analysis = analyze(source, name, format=format or None, **live_fields(last_write))
        sha256, size = store(data, present=present), data.size
    else:
        analysis = analyze(data, name, format=format or None, **live_fields(last_write))
        sha256, size = store_blob(data, present=present), len(data)
    session = Session.objects.create(
        workspace=workspace,
        name=name,
        format=analysis.format,
        record_count=analysis.record_count,
        fault_counts=analysis.fault_counts,
        error=analysis.error or "",
        created_by=acting_user,
        last_write=last_write,
        live_until=live_until(last_write),
        **fields,
    )
    raw = Revision.objects.create(
        session=session,
        number=0,
        sha256=sha256,
        size=size,
        engine_version=ENGINE_VERSION,
        origin=origin,
        created_by=acting_user,
    )
    session.head = raw
    session.save(update_fields=["head"])
    AuditRecord.objects.create(
        source=fields.get("source"),
        acting_user=acting_user,
        session=session,
        revision_to=raw,
        op=AuditRecord.Action.INGEST,
        engine_version=ENGINE_VERSION,
        note=f"{origin}: {size} bytes",
    )
    return session


def do_ingest_session(
    workspace: Workspace,
    name: str,
    data: bytes | Staged,
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    api_token: ApiToken | None = None,
) -> Session:
    """Store `data` (any bytes, readable or not) as revision 0 of a new session.

    `data` is the bytes, or a `Staged` file (an upload), which is analysed
    and stored a chunk at a time. The bytes are kept exactly as given; an
    unreadable file becomes a session whose `error` says why (file, line,
    reason). The name loses its control and format characters (bidi
    overrides among them); one too long for the database is shortened with
    `fit_name`. `last_write` is when the source
    file was last written, if known (a file read from disk; not an upload):
    within settings.LIVE_GRACE of it the session is live. `api_token` is the
    token of an upload through the API (its revision's origin is then "api").
    """
    return do_ingest_sessions(
        workspace,
        [(name, data)],
        acting_user=acting_user,
        last_write=last_write,
        format=format,
        api_token=api_token,
    )[0]


def do_ingest_sessions(
    workspace: Workspace,
    files: Iterable[tuple[str, bytes | Staged]],
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    api_token: ApiToken | None = None,
) -> list[Session]:
    """Store each (name, bytes or staged file) of `files` as `do_ingest_session` does, all or none.

    One transaction holds every session; if anything fails, it rolls back and
    the blobs this call wrote that no revision uses are deleted, so a failed
    upload leaves nothing half-stored. Returns the sessions in the order of
    `files`; re-raises what failed.
    """
    files = list(files)
    hashes = {
        data.sha256 if isinstance(data, Staged) else hashlib.sha256(data).hexdigest()
        for _, data in files
    }
    # Blobs that are not there yet are this call's to take back if it fails. One
    # `exists` (a HEAD) per content: what it found is not asked again.
    new = [sha256 for sha256 in hashes if not default_storage.exists(blob_name(sha256))]
    present = hashes - set(new)
    try:
        with transaction.atomic(durable=True):
            return [
                create_session(
                    workspace,
                    name,
                    data,
                    acting_user=acting_user,
                    last_write=last_write,
                    format=format,
                    origin="api" if api_token else "upload",
                    present=present,
                    api_token=api_token,
                )
                for name, data in files
            ]
    except BaseException:
        _delete_unused_blobs(new)
        raise


class CannotDelete(Exception):
    """A session cannot be deleted: a sync follows its file, or a job is working on it."""


def do_delete_sessions(sessions: Iterable[Session], *, acting_user: Any) -> int:
    """Delete `sessions` (an editor's act): hidden everywhere, audited, their blobs removed.

    The rows stay (audit records are append-only and name the session and
    its revisions); each session gets a `delete` audit record and loses its
    timelines; a blob goes once no revision of a session still there refers
    to it. Raises CannotDelete, deleting nothing, when a sync source follows
    one of the files (the next sync would bring it back) or an unfinished
    job holds one. Returns how many were deleted.
    """
    pks = [session.pk for session in sessions]
    now = timezone.now()
    with transaction.atomic(durable=True):
        locked = list(Session.objects.select_for_update().filter(pk__in=pks).order_by("pk"))
        for session in locked:
            if session.source_id is not None:
                raise CannotDelete(
                    f"{session.name} is synced from a folder: remove the file there, or turn "
                    "the source off, instead (the next sync would bring it back)."
                )
        busy = (
            JobItem.objects.filter(session__in=locked, status__in=UNFINISHED)
            .values_list("session__name", flat=True)
            .first()
        )
        if busy is not None:
            raise CannotDelete(f"{busy} is in a job still running: wait for it, or cancel it.")
        revisions = Revision.objects.filter(session__in=locked)
        shas = {sha for pair in revisions.values_list("sha256", "delta") for sha in pair if sha}
        Timeline.objects.filter(revision__session__in=locked).delete()
        for session in locked:
            search.drop_session(session.pk)
        Session.objects.filter(pk__in=[s.pk for s in locked]).update(deleted_at=now)
        AuditRecord.objects.bulk_create(
            AuditRecord(
                acting_user=acting_user,
                session=session,
                revision_from_id=session.head_id,
                op=AuditRecord.Action.DELETE,
                engine_version=ENGINE_VERSION,
                note=f"deleted by {acting_user}: {session.name}"
                + (f" (unreadable: {session.error[:200]})" if session.error else ""),
            )
            for session in locked
        )
        transaction.on_commit(lambda: _delete_blobs_of_deleted(sorted(shas)))
    return len(locked)


def _delete_blobs_of_deleted(shas: list[str]) -> None:
    """Delete the blobs of `shas` that no revision of a session still there refers to."""
    kept = Revision.objects.filter(
        Q(sha256__in=shas) | Q(delta__in=shas), session__deleted_at__isnull=True
    ).values_list("sha256", "delta")
    used = {sha for pair in kept for sha in pair}
    for sha256 in set(shas) - used:
        default_storage.delete(blob_name(sha256))


def _delete_unused_blobs(shas: list[str]) -> None:
    """Delete the blobs of `shas` that no revision refers to (a failed write's leftovers).

    Best effort: when the database cannot tell (it may be what failed), the
    blobs stay, unreferenced but harmless.
    """
    try:
        used = set(Revision.objects.filter(sha256__in=shas).values_list("sha256", flat=True))
    except DatabaseError:
        return
    for sha256 in set(shas) - used:
        default_storage.delete(blob_name(sha256))


# API tokens.


def do_create_api_token(
    workspace: Workspace, name: str, *, acting_user: Any
) -> tuple[ApiToken, str]:
    """Create an API token named `name` for `workspace`; return it and its secret.

    The secret is returned this once: only its sha256 is stored.
    """
    secret = ApiToken.generate()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(
            workspace=workspace,
            name=name,
            prefix=secret[: ApiToken.PREFIX_LENGTH],
            hashed_key=hash_token(secret),
            created_by=acting_user,
        )
    return token, secret


def do_revoke_api_token(token: ApiToken, *, acting_user: Any) -> bool:
    """Revoke `token`: it no longer authenticates. Return False if it already was revoked."""
    with transaction.atomic(durable=True):
        return bool(
            ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
        )


def do_mark_token_used(token: ApiToken, *, now: datetime | None = None) -> None:
    """Record that `token` was used at `now`, at most once a minute (a request need not write)."""
    now = now or timezone.now()
    if token.last_used is not None and now - token.last_used < TOKEN_USE_RESOLUTION:
        return
    with transaction.atomic(durable=True):
        ApiToken.objects.filter(
            Q(last_used__isnull=True) | Q(last_used__lt=now - TOKEN_USE_RESOLUTION), pk=token.pk
        ).update(last_used=now)
    token.last_used = now


# Starting, cancelling and retrying jobs.


def send_task(task: Task, *args: Any) -> None:
    """Publish `task` now, inside the caller's transaction; raise BrokerUnavailable if we can't.

    A failure raises out of the caller's `atomic` block, so the job rows it
    was about to commit are rolled back with it.
    """
    with task.app.connection_for_write() as connection:
        try:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0.5)
            task.apply_async(args, connection=connection, retry=False)
        except (OperationalError, *connection.connection_errors) as exc:
            where = maybe_sanitize_url(task.app.conf.broker_url)
            raise BrokerUnavailable(
                f"The task queue ({where}) cannot be reached: {str(exc).rstrip('.')}. "
                "Nothing was started; try again once it is back."
            ) from exc


def _create_job(
    workspace: Workspace,
    rows: Iterable[tuple[int, int]],
    *,
    kind: str,
    policy: str,
    acting_user: Any,
    **fields: Any,
) -> Job:
    """Create a job with one item per (session id, base revision id) and send its kickoff.

    Must run inside the caller's durable transaction.
    """
    from transcripts.tasks import start_job

    job = Job.objects.create(
        workspace=workspace, created_by=acting_user, kind=kind, policy=policy, **fields
    )
    items = JobItem.objects.bulk_create(
        (JobItem(job=job, session_id=session_id, base_id=base_id) for session_id, base_id in rows),
        batch_size=1000,
    )
    job.total = len(items)
    job.save(update_fields=["total"])
    send_task(start_job, job.pk)
    return job


def do_start_job(
    workspace: Workspace,
    sessions: Iterable[Session] | QuerySet[Session],
    *,
    policy: str,
    kind: str = Job.Kind.REPAIR,
    force: bool = False,
    selection: dict[str, Any] | None = None,
    acting_user: Any,
    api_token: ApiToken | None = None,
) -> Job:
    """Start a repair, dry run or export of `sessions` of `workspace` under `policy`.

    Each item's fence is its session's head now. `force` makes a repair
    treat pending results as missing instead of skipping live sessions.
    `selection` records the filter the sessions were chosen by; `api_token`
    the token of a job started through the API. Raises BrokerUnavailable
    (and creates nothing) when the task queue is down.
    """
    ids = sessions.values("pk") if isinstance(sessions, QuerySet) else [s.pk for s in sessions]
    with transaction.atomic(durable=True):
        rows = (
            Session.objects.filter(pk__in=ids, workspace=workspace, head__isnull=False)
            .order_by("pk")
            .values_list("pk", "head_id")
        )
        return _create_job(
            workspace,
            rows,
            kind=kind,
            policy=policy,
            force=force,
            selection=selection or {},
            acting_user=acting_user,
            api_token=api_token,
        )


def do_start_repair_from_dry_run(
    dry_run: Job, *, acting_user: Any, api_token: ApiToken | None = None
) -> Job:
    """Repair exactly what the dry run `dry_run` planned, fenced on the heads it read.

    A session whose head moved since the dry run is skipped as `fence_lost`.
    Raises JobStateError unless `dry_run` is a finished dry run not applied yet.
    """
    if dry_run.kind != Job.Kind.DRY_RUN or dry_run.status != Job.Status.DONE:
        raise JobStateError("Only a finished dry run can be applied.")
    with transaction.atomic(durable=True):
        # Locked, so two clicks at once cannot both apply it.
        Job.objects.select_for_update().filter(pk=dry_run.pk).first()
        applied = Job.objects.filter(source_job=dry_run, kind=Job.Kind.REPAIR).first()
        if applied is not None:
            raise JobStateError(f"This dry run was applied already, by job {applied.pk}.")
        rows = dry_run.items.filter(status=JobItem.Status.WOULD_REPAIR).values_list(
            "session_id", "base_id"
        )
        return _create_job(
            dry_run.workspace,
            rows,
            kind=Job.Kind.REPAIR,
            policy=dry_run.policy,
            force=dry_run.force,
            selection=dry_run.selection,
            source_job=dry_run,
            acting_user=acting_user,
            api_token=api_token,
        )


def rollback_blocker(job: Job) -> str:
    """Return why `job` cannot be rolled back ("" when it can), as a sentence for people.

    Only a finished repair job that repaired a session and was not rolled back
    already (by a rollback not cancelled) can be.
    """
    if job.kind != Job.Kind.REPAIR or not job.is_finished:
        return "Only a finished repair job can be rolled back."
    if not job.items.filter(status=JobItem.Status.REPAIRED).exists():
        return f"Job {job.pk} repaired no session: there is nothing to roll back."
    earlier = (
        Job.objects.filter(source_job=job, kind=Job.Kind.ROLLBACK)
        .exclude(status=Job.Status.CANCELLED)
        .first()
    )
    if earlier is not None:
        return f"Job {job.pk} was rolled back already, by job {earlier.pk}."
    return ""


def do_start_rollback_job(job: Job, *, acting_user: Any, api_token: ApiToken | None = None) -> Job:
    """Start undoing the repair job `job`: each session it repaired gets its previous bytes back.

    The rollback's fence is the revision `job` wrote: a session changed
    since is reported (`fence_lost`), never overwritten. Raises
    JobStateError when `rollback_blocker` names a reason.
    """
    with transaction.atomic(durable=True):
        # Locked, so two clicks at once cannot both start a rollback.
        Job.objects.select_for_update().filter(pk=job.pk).first()
        blocker = rollback_blocker(job)
        if blocker:
            raise JobStateError(blocker)
        rows = job.items.filter(status=JobItem.Status.REPAIRED).values_list(
            "session_id", "revision_id"
        )
        return _create_job(
            job.workspace,
            rows,
            kind=Job.Kind.ROLLBACK,
            policy=job.policy,
            source_job=job,
            acting_user=acting_user,
            api_token=api_token,
        )


def do_cancel_job(job: Job, *, acting_user: Any) -> bool:
    """Cancel `job`: its unfinished items are never written. Return False if it had finished.

    An item a worker is writing right now either commits first (and counts)
    or finds its claim gone and writes nothing.
    """
    with transaction.atomic(durable=True):
        # Items before the job row: a worker finishing an item locks them in that order too.
        cancelled = JobItem.objects.filter(job=job, status__in=UNFINISHED).update(
            status=JobItem.Status.CANCELLED, claim=None
        )
        if not Job.objects.filter(
            pk=job.pk, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
        ).update(
            status=Job.Status.CANCELLED,
            finished_at=timezone.now(),
            cancelled=F("cancelled") + cancelled,
        ):
            transaction.set_rollback(True)
            return False
    return True


def do_retry_failed_items(job: Job, *, acting_user: Any) -> int:
    """Queue the failed items of the finished job `job` again; return how many.

    They keep their fence. Raises BrokerUnavailable (and changes nothing)
    when the task queue is down.
    """
    from transcripts.tasks import start_job

    with transaction.atomic(durable=True):
        if not Job.objects.filter(pk=job.pk, status=Job.Status.DONE, failed__gt=0).update(
            status=Job.Status.QUEUED, finished_at=None
        ):
            return 0
        retried = JobItem.objects.filter(job=job, status=JobItem.Status.FAILED).update(
            status=JobItem.Status.QUEUED, error="", claim=None, claimed_at=None
        )
        Job.objects.filter(pk=job.pk).update(
            failed=F("failed") - retried,
            # A job from before the counter has none: never below zero.
            processed=Greatest(F("processed") - retried, Value(0)),
        )
        send_task(start_job, job.pk)
    return retried


# Running jobs: what the tasks call.


def do_fan_out_job(job_id: int) -> list[list[int]]:
    """Mark job `job_id` running and return its unfinished item ids in chunks.

    Chunks hold `settings.JOB_CHUNK_SIZE` items. A job with nothing left to
    do is finished here. Raises Job.DoesNotExist while the job is not
    committed (also when its commit came between this call's two statements).
    """
    with transaction.atomic(durable=True):
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.RUNNING, started_at=timezone.now()
        )
        job = Job.objects.get(pk=job_id)
    if job.status == Job.Status.QUEUED:
        # Committed between the UPDATE (which did not see it) and the read: as if not yet.
        raise Job.DoesNotExist(f"job {job_id} was committed while its kickoff ran")
    if job.status != Job.Status.RUNNING:
        return []
    ids = list(job.items.filter(status__in=UNFINISHED).order_by("pk").values_list("pk", flat=True))
    if not ids:
        _maybe_finish(job_id)
    size = settings.JOB_CHUNK_SIZE
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def chunk_queues(job_id: int, chunks: list[list[int]]) -> list[tuple[list[int], str | None]]:
    """Return each chunk of job `job_id`'s item ids with the queue to send it to.

    None is the default queue. With settings.CELERY_SYNC_QUEUE set (sync
    folders live on one host), the items of a repair or rollback whose
    session's source writes back are regrouped into chunks of their own for
    that queue, whose worker has the folder; the rest keep the default.
    """
    queue = settings.CELERY_SYNC_QUEUE
    if not queue or not chunks or not Job.objects.get(pk=job_id).writes:
        return [(chunk, None) for chunk in chunks]
    ids = [pk for chunk in chunks for pk in chunk]
    local = set(
        JobItem.objects.filter(
            pk__in=ids, session__synced_file__source__write_back=True
        ).values_list("pk", flat=True)
    )
    size = settings.JOB_CHUNK_SIZE
    routed: list[tuple[list[int], str | None]] = []
    for group, to in (
        ([pk for pk in ids if pk in local], queue),
        ([pk for pk in ids if pk not in local], None),
    ):
        routed += [(group[i : i + size], to) for i in range(0, len(group), size)]
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
    items = list(
        JobItem.objects.filter(pk__in=item_ids, claim=claim, status=JobItem.Status.RUNNING)
        .select_related("session__head", "base__parent")
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

    `revision` holds the Revision's fields, `session` the session fields that
    go with the new head, `audit` the fields of each audit record (all of them
    from `fence` to the new revision). `write_back`, when set, replaces the
    session's source file in the same transaction with the bytes `content`
    yields (streamed from storage).
    """

    fence: Revision
    revision: dict[str, Any]
    session: dict[str, Any]
    audit: list[dict[str, Any]]
    write_back: writeback.WriteBack | None = None
    content: Callable[[], Iterator[bytes]] | None = None


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
    results are written in one transaction (`_write`). A session whose
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
    for item in items:
        # The same session, already loaded: reading the base needs its name and format.
        item.base.session = item.session
        try:
            outcomes.append(PROCESSORS[job.kind](item, job, item.session_id in writing_back))
        except Exception as exc:  # an engine or storage error must fail one item, not the job
            error = f"{type(exc).__name__}: {exc}"
            outcomes.append(Outcome(item, JobItem.Status.FAILED, {"error": error}))
        # Counted now, not when the chunk is written: the bar moves a session at a time.
        Job.objects.filter(pk=job.pk).update(processed=F("processed") + 1)
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
    return written


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
    held = JobItem.objects.filter(claim=claim, status=JobItem.Status.RUNNING)
    with transaction.atomic(durable=True):
        ours = held.select_for_update(skip_locked=True).filter(pk__in=by_pk).order_by("pk")
        kept = [by_pk[pk] for pk in ours.values_list("pk", flat=True)]
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
        # One UPDATE per item with fields of its own, one per status for the others:
        # cheaper than bulk_update's CASE expressions, in this process and in the database.
        finished = 0
        plain: dict[str, list[int]] = {}
        for pk, (status, fields) in results.items():
            if fields:
                finished += held.filter(pk=pk).update(status=status, **fields)
            else:
                plain.setdefault(status, []).append(pk)
        for status, pks in plain.items():
            finished += held.filter(pk__in=pks).update(status=status)
        assert finished == len(kept), "the locked items are ours until this transaction ends"
        counts = Counter(COUNTERS[JobItem.Status(status)] for status, _ in results.values())
        # Last in the transaction: the job row is the one row every worker writes.
        Job.objects.filter(pk=job.pk).update(**{c: F(c) + n for c, n in counts.items()})
    return [o.item.pk for o in kept]


def _write_heads(job: Job, outcomes: list[Outcome]) -> list[Revision]:
    """Write each outcome's new head: revision, session head (compare-and-set), audit, write-back.

    The sessions are locked and still at their fences. Return the revisions.
    """
    if not outcomes:
        return []
    heads = [o.head for o in outcomes if o.head is not None]
    revisions = Revision.objects.bulk_create(Revision(**head.revision) for head in heads)
    for o, head, revision in zip(outcomes, heads, revisions, strict=True):
        moved = Session.objects.filter(pk=o.item.session_id, head=head.fence).update(
            head=revision, **head.session
        )
        assert moved, "the locked session is at its fence"
        # The search holds the old head's records until the new head's timeline is built.
        search.drop_session(o.item.session_id)
    AuditRecord.objects.bulk_create(
        AuditRecord(**fields, revision_to=revision)
        for head, revision in zip(heads, revisions, strict=True)
        for fields in head.audit
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


def _repair_item(item: JobItem, job: Job, writes_back: bool) -> Outcome:
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
    last_write = None if job.force else session.last_write
    with open_analysis(base, job.policy, last_write=last_write) as analysis:
        return _repair_analysed(item, job, writes_back, analysis)


def _repair_analysed(item: JobItem, job: Job, writes_back: bool, analysis: Analysis) -> Outcome:
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
            diff = f"(no diff: the session is {base.size / 1e6:.0f} MB)"
        else:
            diff = _diff(base.read(), analysis.repaired, session.name)
        return Outcome(item, JobItem.Status.WOULD_REPAIR, {"diff": diff, **plan_fields})
    try:
        write_back = writeback.check(session, base) if writes_back else None
    except writeback.WriteBackRefused as exc:
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": str(exc)})
    # The new head's own faults, for the session list.
    record_count, fault_counts = analysis.repaired_counts()
    sha256, size = store_repaired(analysis)
    revision = {
        "session": session,
        "number": base.number + 1,
        "sha256": sha256,
        "size": size,
        "policy": job.policy,
        "engine_version": ENGINE_VERSION,
        "origin": "repair",
        "parent": base,
        "created_by": job.created_by,
    }
    head = NewHead(
        base,
        revision,
        {"record_count": record_count, "fault_counts": fault_counts},
        [_op_audit_fields(op, analysis, job=job, base=base) for op in ops],
        write_back,
        functools.partial(blob_chunks, sha256),
    )
    return Outcome(item, JobItem.Status.REPAIRED, plan_fields, head)


def _write_back(
    write_back: writeback.WriteBack,
    content: Callable[[], Iterator[bytes]],
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


def _rollback_item(item: JobItem, job: Job, writes_back: bool) -> Outcome:
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
    with previous.source() as source:
        restored = analyze(source, session.name, format=session.format, summaries=False)
    try:
        write_back = writeback.check(session, undone) if writes_back else None
    except writeback.WriteBackRefused as exc:
        return Outcome(item, JobItem.Status.FENCE_LOST, {"error": str(exc)})
    revision = {
        "session": session,
        "number": undone.number + 1,
        **previous.storage_fields(),
        "engine_version": ENGINE_VERSION,
        "origin": "rollback",
        "parent": undone,
        "created_by": job.created_by,
    }
    audit = {
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
        {"record_count": restored.record_count, "fault_counts": restored.fault_counts},
        [audit],
        write_back,
        previous.chunks,
    )
    return Outcome(item, JobItem.Status.ROLLED_BACK, {}, head)


def _export_item(item: JobItem, job: Job, writes_back: bool) -> Outcome:
    """Repair one session's fenced head under the job's policy into a blob for the archive.

    Nothing is written to the session or its source file; as the
    single-session download does, the export ignores whether the session is live.
    """
    with open_analysis(item.base, job.policy) as analysis:
        if analysis.error:
            return Outcome(item, JobItem.Status.FAILED, {"error": analysis.error})
        # Stored even when unchanged: a revision made by an append may keep only its delta.
        sha256_after, _ = store_repaired(analysis)
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
                "record": op.record if op.record is not None else op.fault.record,
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
    with transaction.atomic(durable=True):
        won = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
            status=Job.Status.DONE, finished_at=timezone.now(), archive=archive or job.archive
        )
    # The loser's archive, or the one a retry of failed items replaced.
    stale = job.archive if won else archive
    if archive and stale:
        default_storage.delete(stale)


def _archive_path(item: JobItem) -> str:
    # Session names come from users: keep them one safe path component.
    name = item.session.name.replace("/", "_").replace("\\", "_").lstrip(".") or "session"
    return f"sessions/{item.session_id}/{name}"


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
    """Return the unified diff of two revisions as text, cut to DIFF_LINES lines."""
    lines = difflib.unified_diff(
        before.decode("utf-8", "replace").splitlines(),
        after.decode("utf-8", "replace").splitlines(),
        f"{name} (before)",
        f"{name} (after)",
        n=1,
        lineterm="",
    )
    kept = []
    for n, line in enumerate(lines):
        if n == DIFF_LINES:
            kept.append("…")
            break
        kept.append(line if len(line) <= DIFF_LINE_CHARS else line[:DIFF_LINE_CHARS] + "…")
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


def do_save_workspace_policy(
    workspace: Workspace,
    name: str,
    table: dict[str, str],
    synthetic_text: str,
    description: str,
    *,
    instance: WorkspacePolicy | None = None,
    acting_user: Any,
) -> WorkspacePolicy:
    """Create (or, given `instance`, change) a workspace policy, validated by the core.

    Raises ValueError with the refused rows when a kind cannot take its action.
    """
    from transcripts.core.policy import custom

    custom(name, table, synthetic_text or None, description)
    with transaction.atomic(durable=True):
        row = instance or WorkspacePolicy(workspace=workspace)
        row.workspace, row.name, row.actions = workspace, name, table
        row.synthetic_text, row.description = synthetic_text, description
        row.save()
    return row
