"""Tasks are sent by name once the transaction commits, from a process that never imports them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone
from kombu.simple import SimpleQueue

from project.celery import app as celery_app
from tests.helpers import sample
from transcripts import actions, queue
from transcripts.actions import runner
from transcripts.models import Job, JobItem

ROOT = Path(__file__).resolve().parents[2]

# A web process: Django set up, a job's kickoff enqueued, the tasks module never imported.
WEB_PROCESS = """
import json, sys
import django
django.setup()
from transcripts import queue
queue.enqueue_on_commit(queue.START_JOB, 41)
print(json.dumps("transcripts.tasks" in sys.modules))
"""


def _next_message(name: str) -> tuple[str, list[object]]:
    # The app's own connection: its transport options too (the filesystem broker's folders).
    with celery_app.connection_for_read() as connection:
        messages = SimpleQueue(connection, name)
        try:
            message = messages.get(timeout=10)
        finally:
            messages.close()
        message.ack()
        args, _, _ = message.decode()
        return message.headers["task"], args


def test_a_process_without_the_tasks_sends_the_kickoff_by_name():
    name = f"pairfix-queue-test-{uuid.uuid4().hex}"
    env = {**os.environ, "CELERY_TASK_DEFAULT_QUEUE": name, "LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        [sys.executable, "-c", WEB_PROCESS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False
    assert _next_message(name) == ("transcripts.start_job", [41])


@pytest.mark.django_db(transaction=True)
def test_nothing_is_sent_when_the_transaction_rolls_back(monkeypatch):
    sent = []
    monkeypatch.setattr(
        celery_app,
        "send_task",
        lambda name, args=(), kwargs=None, **_: sent.append((name, tuple(args))),
    )

    class Refused(Exception):
        pass

    with pytest.raises(Refused), transaction.atomic():
        queue.enqueue_on_commit(queue.SYNC_SOURCE, 7)
        raise Refused
    assert sent == []

    with transaction.atomic():
        queue.enqueue_on_commit(queue.SYNC_SOURCE, 8)
        assert sent == []  # not before the commit
    assert sent == [("transcripts.sync_source", (8,))]


@pytest.mark.django_db
def test_the_sweep_kicks_jobs_whose_kickoff_or_chunk_was_lost(alice, workspace, ingest, settings):
    session = ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl"))
    fresh, lost, running, stale = (
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
        for _ in range(4)
    )
    now = timezone.now()
    Job.objects.filter(pk=lost.pk).update(
        created_at=now - timedelta(seconds=settings.JOB_SWEEP_AFTER + 1)
    )
    Job.objects.filter(pk__in=[running.pk, stale.pk]).update(status=Job.Status.RUNNING)
    JobItem.objects.filter(job=running).update(
        status=JobItem.Status.RUNNING, claimed_at=now - timedelta(seconds=settings.JOB_CLAIM_LEASE)
    )
    JobItem.objects.filter(job=stale).update(
        status=JobItem.Status.RUNNING,
        claimed_at=now - timedelta(seconds=2 * settings.JOB_CLAIM_LEASE + 1),
    )
    assert runner.jobs_to_kick(now) == [lost.pk, stale.pk]
    assert fresh.pk not in runner.jobs_to_kick(now)


@pytest.mark.django_db
def test_the_sweep_kicks_a_running_job_whose_chunks_were_lost(alice, workspace, ingest, settings):
    session = ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    # start_job fanned out (job running, items queued), then its RUN_JOB_ITEMS send failed
    # or Redis lost the message: no item is ever claimed.
    assert runner.do_fan_out_job(job.pk) == [[job.items.get().pk]]
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert set(job.items.values_list("status", flat=True)) == {JobItem.Status.QUEUED}
    assert job.pk not in runner.jobs_to_kick()  # its chunks may still be on the way
    later = timezone.now() + timedelta(days=1)
    assert job.pk in runner.jobs_to_kick(later), "a running job with unclaimed items is stuck"
    # Kicked again, the fan-out sends the same chunk, and the chunk finishes the job.
    assert runner.do_fan_out_job(job.pk) == [[job.items.get().pk]]
    assert runner.do_run_job_items(job.pk, [job.items.get().pk]) == []
    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    assert job.pk not in runner.jobs_to_kick(later)


@pytest.mark.django_db
def test_the_sweep_leaves_a_job_whose_chunks_are_being_claimed(alice, workspace, ingest, settings):
    sessions = [ingest(workspace, f"{i}.jsonl", sample("formats/claude_code.jsonl")) for i in "ab"]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    [[first, _]] = runner.do_fan_out_job(job.pk)
    now = timezone.now() + timedelta(seconds=settings.JOB_SWEEP_AFTER + 1)
    # One chunk claimed a moment ago, the other waiting behind it in the queue.
    JobItem.objects.filter(pk=first).update(status=JobItem.Status.RUNNING, claimed_at=now)
    assert job.pk not in runner.jobs_to_kick(now)
    later = now + timedelta(seconds=settings.JOB_SWEEP_AFTER + 1)
    assert job.pk in runner.jobs_to_kick(later)
