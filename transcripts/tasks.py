"""Thin Celery tasks: take ids, call one action.

Every task may run more than once (`acks_late`: a worker that dies mid-task
leaves its message to be delivered again); the actions make that harmless.
"""

from typing import Any

import structlog
from celery import Task, shared_task
from django.conf import settings
from django.db import DatabaseError

from transcripts import actions, sync, timeline
from transcripts.models import Job

logger = structlog.get_logger(__name__)


@shared_task(name="transcripts.start_job", bind=True, acks_late=True, max_retries=30)
def start_job(self: Task, job_id: int) -> None:
    """Fan job `job_id` out into chunks of items, one task each."""
    try:
        chunks = actions.do_fan_out_job(job_id)
    except Job.DoesNotExist:
        # Sent just before the job's transaction commits: give the commit a moment.
        raise self.retry(countdown=0.5) from None
    for item_ids, queue in actions.chunk_queues(job_id, chunks):
        run_job_items.apply_async((job_id, item_ids), queue=queue)


@shared_task(name="transcripts.run_job_items", bind=True, acks_late=True, max_retries=None)
def run_job_items(self: Task, job_id: int, item_ids: list[int]) -> Any:
    """Process one chunk of job `job_id`; retry the items another worker holds later.

    A database error the chunk's write could not survive (the server gone, a
    statement cancelled) retries the whole chunk once the claim's lease has
    passed, so the retry takes over the items this run had claimed.
    """
    try:
        busy = actions.do_run_job_items(job_id, item_ids)
    except DatabaseError as exc:
        logger.warning("job_chunk_retried", job=job_id, items=len(item_ids), error=str(exc))
        raise self.retry(countdown=settings.JOB_CLAIM_LEASE, exc=exc) from None
    if busy:
        # Their worker may have died: once its lease has passed, the retry takes them over.
        raise self.retry(args=(job_id, busy), countdown=settings.JOB_CLAIM_LEASE)


@shared_task(name="transcripts.sync_source", acks_late=True)
def sync_source(source_id: int) -> str:
    """Sync one source's folder; a sync already running on it makes this a no-op."""
    return sync.do_sync_source(source_id).summary()


@shared_task(name="transcripts.sync_all_sources")
def sync_all_sources() -> None:
    """Queue a sync of every enabled source (the beat schedule runs this)."""
    for source_id in sync.sources_due():
        sync_source.delay(source_id)


@shared_task(name="transcripts.expire_live_sessions")
def expire_live_sessions() -> int:
    """Turn the pending results of sessions whose grace ran out into missing ones."""
    return sync.do_expire_live_sessions()


@shared_task(name="transcripts.build_timeline", acks_late=True)
def build_timeline(timeline_id: int) -> None:
    """Build the rows of timeline `timeline_id` for the session page (once, whoever asks)."""
    timeline.do_build_timeline(timeline_id)
