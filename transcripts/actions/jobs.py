"""Jobs: starting a repair, dry run, export or rollback, cancelling one, retrying its failures.

Starting one creates the job and its items in one transaction and sends the
kickoff task once it commits (`transcripts.queue`): a broker that is down
raises BrokerUnavailable before the commit, so nothing is left that never
runs. What the workers then do is `transcripts.actions.runner`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, QuerySet, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from transcripts import queue
from transcripts.actions.common import UNFINISHED, EventType, JobStateError, audit
from transcripts.models import ApiToken, Job, JobItem, Session, Workspace


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

    Must run inside the caller's durable transaction; the kickoff goes once it commits.
    """
    job = Job.objects.create(
        workspace=workspace, created_by=acting_user, kind=kind, policy=policy, **fields
    )
    items = JobItem.objects.bulk_create(
        (JobItem(job=job, session_id=session_id, base_id=base_id) for session_id, base_id in rows),
        batch_size=1000,
    )
    job.total = len(items)
    job.save(update_fields=["total"])
    audit(
        EventType.JOB_CREATED,
        workspace_id=workspace.pk,
        acting_user=acting_user,
        job=job,
        extra_data={"kind": kind, "policy": policy, "items": job.total},
    )
    queue.enqueue_on_commit(queue.START_JOB, job.pk)
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
    ids: Iterable[int] = (
        sessions.values_list("pk", flat=True)
        if isinstance(sessions, QuerySet)
        else [s.pk for s in sessions]
    )
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
        audit(
            EventType.JOB_CANCELLED,
            workspace_id=job.workspace_id,
            acting_user=acting_user,
            job=job,
            extra_data={"cancelled_items": cancelled},
        )
    return True


def do_retry_failed_items(job: Job, *, acting_user: Any) -> int:
    """Queue the failed items of the finished job `job` again; return how many.

    They keep their fence. An item whose session's stored file is missing
    or damaged (`JobItem.unreadable`) would fail again: it stays failed. A
    job with no other failed item is left done, and 0 returned. Raises
    BrokerUnavailable (and changes nothing) when the task queue is down.
    """
    retryable = JobItem.objects.filter(job=job, status=JobItem.Status.FAILED, unreadable=False)
    with transaction.atomic(durable=True):
        if not Job.objects.filter(Exists(retryable), pk=job.pk, status=Job.Status.DONE).update(
            status=Job.Status.QUEUED, finished_at=None
        ):
            return 0
        retried = retryable.update(
            status=JobItem.Status.QUEUED, error="", claim=None, claimed_at=None, counted=False
        )
        Job.objects.filter(pk=job.pk).update(
            failed=F("failed") - retried,
            # A job from before the counter has none: never below zero.
            processed=Greatest(F("processed") - retried, Value(0)),
        )
        audit(
            EventType.JOB_RETRIED,
            workspace_id=job.workspace_id,
            acting_user=acting_user,
            job=job,
            extra_data={"retried_items": retried},
        )
        queue.enqueue_on_commit(queue.START_JOB, job.pk)
    return retried
