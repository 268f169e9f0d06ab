"""Thin Celery tasks: take ids, call one action. A leaf: nothing imports this module.

Work is sent by name (`transcripts.queue`), so the actions never import the
tasks. Every task may run more than once (`acks_late`: a worker that dies
mid-task leaves its message to be delivered again); the actions make that
harmless.
"""

from typing import Any

import structlog
from celery import Task, shared_task
from django.conf import settings
from django.db import DatabaseError

from transcripts import actions, queue, uploads
from transcripts.actions import runner, sync

logger = structlog.get_logger(__name__)


@shared_task(name=queue.START_JOB, acks_late=True)
def start_job(job_id: int) -> None:
    """Fan job `job_id` out into chunks of items, one task each."""
    chunks = runner.do_fan_out_job(job_id)
    for item_ids, to in runner.chunk_queues(job_id, chunks):
        queue.send(queue.RUN_JOB_ITEMS, job_id, item_ids, to=to)


@shared_task(name=queue.RUN_JOB_ITEMS, bind=True, acks_late=True, max_retries=None)
def run_job_items(self: Task[Any, Any], job_id: int, item_ids: list[int]) -> Any:
    """Process one chunk of job `job_id`; retry the items another worker holds later.

    A database error the chunk's write could not survive (the server gone, a
    statement cancelled) retries the whole chunk once the claim's lease has
    passed, so the retry takes over the items this run had claimed; the job
    page says so if the database takes the note by then.
    """
    try:
        busy = runner.do_run_job_items(job_id, item_ids)
    except DatabaseError as exc:
        logger.warning("job_chunk_retried", job=job_id, items=len(item_ids), error=str(exc))
        runner.note_database_outage(job_id, exc)
        raise self.retry(countdown=settings.JOB_CLAIM_LEASE, exc=exc) from None
    if busy:
        # Their worker may have died: once its lease has passed, the retry takes them over.
        raise self.retry(args=(job_id, busy), countdown=settings.JOB_CLAIM_LEASE)


@shared_task(name="transcripts.sweep_jobs")
def sweep_jobs() -> int:
    """Kick again the jobs whose kickoff or chunks were lost (the beat schedule runs this)."""
    kicked = runner.jobs_to_kick()
    for job_id in kicked:
        queue.send(queue.START_JOB, job_id)
    _sweep_staged()
    return len(kicked)


def _sweep_staged() -> None:
    """Delete this host's staged files left by a killed process (see `uploads.sweep_staged`)."""
    removed = uploads.sweep_staged()
    if removed:
        logger.info("staged_files_swept", removed=removed)


@shared_task(name=queue.SYNC_SOURCE, acks_late=True)
def sync_source(source_id: int) -> str:
    """Sync one source's folder; a sync already running on it makes this a no-op."""
    return sync.do_sync_source(source_id).summary()


@shared_task(name="transcripts.sync_all_sources")
def sync_all_sources() -> None:
    """Queue a sync of every enabled source (the beat schedule runs this)."""
    for source_id in sync.sources_due():
        queue.send(queue.SYNC_SOURCE, source_id)
    _sweep_staged()  # on the host that syncs (CELERY_SYNC_QUEUE), where syncs stage


@shared_task(name="transcripts.expire_live_sessions")
def expire_live_sessions() -> int:
    """Turn the pending results of sessions whose grace ran out into missing ones."""
    return sync.do_expire_live_sessions()


@shared_task(name=queue.COUNT_SESSION, acks_late=True)
def count_session(session_id: int) -> None:
    """Read the head of session `session_id`, stored unread, for its format, counts and error."""
    actions.do_count_session(session_id)


@shared_task(name=queue.BUILD_TIMELINE, acks_late=True)
def build_timeline(timeline_id: int) -> None:
    """Build the rows of timeline `timeline_id` for the session page (once, whoever asks)."""
    actions.do_build_timeline(timeline_id)
