"""Thin Celery tasks: take ids, call one action."""

from celery import shared_task

from transcripts import actions


@shared_task(name="transcripts.run_repair_job", acks_late=True)
def run_repair_job(job_id: int) -> None:
    """Run the bulk repair job `job_id`; idempotent, so a redelivery is harmless."""
    actions.do_run_repair_job(job_id)
