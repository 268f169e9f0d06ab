"""Every write Pairfix makes: one `do_*` function per state change.

Each runs in `transaction.atomic(durable=True)`, takes the acting user as a
keyword-only argument (None for the command line) and writes its audit rows in
the same transaction. Tasks are enqueued on commit, so a worker never sees a
job whose rows are not there yet.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from transcripts.core.model import Op, OpKind
from transcripts.engine import ENGINE_VERSION, Analysis, analyze
from transcripts.models import (
    AuditRecord,
    Job,
    JobItem,
    Membership,
    Revision,
    Session,
    Workspace,
    store_blob,
)

# Ops that take bytes out of a record: the audit keeps that record's span and bytes.
REMOVING_OPS = {
    OpKind.DROP_RESULT,
    OpKind.MOVE_RESULT,
    OpKind.DROP_CALL,
    OpKind.DROP_RECORD,
    OpKind.RESULTS_FIRST,
}


class FenceLost(Exception):
    """The session's head moved between reading it and writing the repair."""


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


def analyze_revision(revision: Revision, policy: str) -> Analysis:
    """Return the analysis of `revision`'s bytes under `policy` (KeyError if unknown)."""
    session = revision.session
    known_format = session.format if session.format != "unknown" and not session.error else None
    return analyze(revision.read(), session.name, policy, format=known_format)


def do_create_workspace(name: str, *, acting_user: Any) -> Workspace:
    """Create the workspace `name`, owned by `acting_user` unless that is None (the CLI)."""
    with transaction.atomic(durable=True):
        workspace = Workspace.objects.create(name=name)
        if acting_user is not None:
            Membership.objects.create(
                user=acting_user, workspace=workspace, role=Membership.Role.OWNER
            )
    return workspace


def do_add_member(workspace: Workspace, user: Any, *, role: str) -> Membership:
    """Make `user` a member of `workspace` with `role`; an existing membership keeps its role."""
    with transaction.atomic(durable=True):
        membership, _ = Membership.objects.get_or_create(
            user=user, workspace=workspace, defaults={"role": role}
        )
    return membership


def do_ingest_session(workspace: Workspace, name: str, data: bytes, *, acting_user: Any) -> Session:
    """Store `data` (any bytes, readable or not) as revision 0 of a new session.

    The bytes are kept exactly as given; an unreadable file becomes a session
    whose `error` says why (file, line, reason). A name too long for the
    database is shortened with `fit_name`.
    """
    name = fit_name(name, Session._meta.get_field("name").max_length or len(name))
    analysis = analyze(data, name)
    sha256 = store_blob(data)
    with transaction.atomic(durable=True):
        session = Session.objects.create(
            workspace=workspace,
            name=name,
            format=analysis.format,
            record_count=analysis.record_count,
            fault_counts=analysis.fault_counts,
            error=analysis.error or "",
            created_by=acting_user,
        )
        raw = Revision.objects.create(
            session=session,
            number=0,
            sha256=sha256,
            size=len(data),
            engine_version=ENGINE_VERSION,
            created_by=acting_user,
        )
        session.head = raw
        session.save(update_fields=["head"])
        AuditRecord.objects.create(
            acting_user=acting_user,
            session=session,
            revision_to=raw,
            op=AuditRecord.Action.INGEST,
            engine_version=ENGINE_VERSION,
        )
    return session


def do_start_repair_job(
    workspace: Workspace, sessions: Iterable[Session], policy: str, *, acting_user: Any
) -> Job:
    """Create a job repairing `sessions` of `workspace` under `policy`; enqueue it on commit."""
    from transcripts.tasks import run_repair_job

    with transaction.atomic(durable=True):
        job = Job.objects.create(workspace=workspace, created_by=acting_user, policy=policy)
        items = JobItem.objects.bulk_create(
            JobItem(job=job, session=session) for session in sessions
        )
        job.total = len(items)
        job.save(update_fields=["total"])
        transaction.on_commit(partial(run_repair_job.delay, job.pk))
    return job


def do_run_repair_job(job_id: int) -> None:
    """Repair every queued item of job `job_id`, then mark the job done.

    Safe to run twice (a redelivered task): each item is claimed with a
    conditional UPDATE inside the transaction that writes its result.
    """
    Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING)
    job = Job.objects.select_related("created_by").get(pk=job_id)
    for item_id in job.items.filter(status=JobItem.Status.QUEUED).values_list("pk", flat=True):
        do_repair_job_item(item_id, job=job)
    Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        status=Job.Status.DONE, finished_at=timezone.now()
    )


def do_repair_job_item(item_id: int, *, job: Job) -> None:
    """Repair the session of one job item under the job's policy, as the job's creator.

    Writes revision n+1 (only if the plan is non-empty), moves the session head
    to it with a compare-and-set (the fence) and one audit record per op. An
    item another worker already finished is left alone.
    """
    item = JobItem.objects.select_related("session__head").get(pk=item_id)
    session, base = item.session, item.session.head
    assert base is not None
    try:
        analysis = analyze_revision(base, job.policy)
        # The new head's own faults, for the session list.
        after = (
            analyze(analysis.repaired, session.name, job.policy, format=analysis.format)
            if analysis.plan
            else None
        )
    except Exception as exc:  # an engine bug must fail one item, not the whole job
        _finish_item(item, job, JobItem.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        return
    if analysis.error:
        _finish_item(item, job, JobItem.Status.FAILED, error=analysis.error)
        return
    if after is None:
        _finish_item(item, job, JobItem.Status.UNCHANGED)
        return
    sha256 = store_blob(analysis.repaired)
    try:
        with transaction.atomic(durable=True):
            # A concurrent repair from the same head fails here on (session, number).
            revision = Revision.objects.create(
                session=session,
                number=base.number + 1,
                sha256=sha256,
                size=len(analysis.repaired),
                policy=job.policy,
                engine_version=ENGINE_VERSION,
                parent=base,
                created_by=job.created_by,
            )
            claimed = JobItem.objects.filter(pk=item.pk, status=JobItem.Status.QUEUED).update(
                status=JobItem.Status.REPAIRED, revision=revision, op_count=len(analysis.plan.ops)
            )
            fenced = Session.objects.filter(pk=session.pk, head=base).update(
                head=revision, record_count=after.record_count, fault_counts=after.fault_counts
            )
            if not (claimed and fenced):
                raise FenceLost(session.pk)
            AuditRecord.objects.bulk_create(
                _op_audit_record(op, analysis, job=job, base=base, revision=revision)
                for op in analysis.plan.ops
            )
            Job.objects.filter(pk=job.pk).update(done=F("done") + 1)
    except (FenceLost, IntegrityError):
        _finish_item(item, job, JobItem.Status.FENCE_LOST, error="the session head moved")


def _finish_item(item: JobItem, job: Job, status: str, *, error: str = "") -> None:
    counter = {JobItem.Status.UNCHANGED: "done", JobItem.Status.FENCE_LOST: "fence_lost"}.get(
        status, "failed"
    )
    with transaction.atomic(durable=True):
        # Conditional: whoever finished the item first counts it, once.
        if JobItem.objects.filter(pk=item.pk, status=JobItem.Status.QUEUED).update(
            status=status, error=error
        ):
            Job.objects.filter(pk=job.pk).update(**{counter: F(counter) + 1})


def _op_audit_record(
    op: Op, analysis: Analysis, *, job: Job, base: Revision, revision: Revision
) -> AuditRecord:
    start = end = removed = None
    transcript = analysis.transcript
    if op.kind in REMOVING_OPS and op.record is not None and transcript is not None:
        record = transcript.records[op.record]
        start, end, removed = record.start, record.end, transcript.raw[record.start : record.end]
    return AuditRecord(
        job=job,
        acting_user=job.created_by,
        session=base.session,
        revision_from=base,
        revision_to=revision,
        op=str(op.kind),
        fault_kind=str(op.fault.kind),
        tool_call_id=op.tool_call_id or "",
        record=op.record if op.record is not None else op.fault.record,
        block=op.block,
        anchor=op.anchor,
        target=op.target,
        policy_row=op.policy_row,
        engine_version=ENGINE_VERSION,
        span_start=start,
        span_end=end,
        removed_bytes=removed,
    )
