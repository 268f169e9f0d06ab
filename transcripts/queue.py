"""Send Celery tasks by name once the caller's transaction commits (zulip's queue_event_on_commit).

A task is named, never imported, so nothing that enqueues work imports
`transcripts.tasks`, which stays a leaf: a task is sent through its object
where this process has it registered (a worker), else by `send_task` (a web
process never imports the tasks). The broker is checked reachable before the
send is registered: a broker that is down raises BrokerUnavailable inside the
caller's transaction, which rolls it back, so nothing is started that cannot
run. The message itself goes out only after the commit, so a worker always
finds the rows it was sent for. A send that fails after the commit (the broker
gone in between) is logged; the beat sweep (`transcripts.sweep_jobs`) re-kicks
a job whose kickoff was lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

logger = structlog.get_logger(__name__)

# The tasks' names (transcripts.tasks declares each with `name=`).
START_JOB = "transcripts.start_job"
RUN_JOB_ITEMS = "transcripts.run_job_items"
SYNC_SOURCE = "transcripts.sync_source"
BUILD_TIMELINE = "transcripts.build_timeline"
COUNT_SESSION = "transcripts.count_session"


class BrokerUnavailable(Exception):
    """The task queue could not be reached, so nothing was started."""


def check_broker() -> None:
    """Raise BrokerUnavailable unless the broker accepts a connection (one try, no wait)."""
    with current_app.connection_for_write() as connection:
        try:
            # kombu takes float seconds; its stubs say int.
            connection.ensure_connection(
                max_retries=1,
                interval_start=0,
                interval_step=0.5,  # type: ignore[arg-type]
            )
        except (OperationalError, *connection.connection_errors) as exc:  # type: ignore[misc]
            where = maybe_sanitize_url(current_app.conf.broker_url)
            raise BrokerUnavailable(
                f"The task queue ({where}) cannot be reached: {str(exc).rstrip('.')}. "
                "Nothing was started; try again once it is back."
            ) from exc


def send(name: str, *args: Any, to: str | None = None) -> None:
    """Publish the task `name` with `args` now (from a task, or outside any transaction).

    `to` names the queue; None leaves it to the task routes or the default queue.
    """
    _publish(name, args, **({"queue": to} if to else {}))


def _publish(name: str, args: tuple[Any, ...], **options: Any) -> None:
    # Through the task where this process has it registered (a worker), else by name.
    task = current_app.tasks.get(name)
    if task is not None:
        task.apply_async(args, **options)
    else:
        current_app.send_task(name, args, **options)


def enqueue_on_commit(name: str, *args: Any, sent: Callable[[], None] | None = None) -> None:
    """Send the task `name` with `args` once the caller's transaction commits.

    Raises BrokerUnavailable now, while the caller can still roll back, when
    the broker cannot be reached. `sent` is called after a successful send.
    Outside a transaction the task is sent at once.
    """
    check_broker()

    def publish() -> None:
        try:
            _publish(name, args, retry=False)
        except Exception as exc:  # whatever the broker raised: the sweep sends it again
            logger.warning("task_not_sent", task=name, args=args, error=str(exc))
            return
        if sent is not None:
            sent()

    transaction.on_commit(publish)
