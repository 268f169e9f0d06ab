"""Jobs run by real `celery worker` processes: a worker killed mid-job, racing jobs, broker down.

The workers listen on a queue of their own (nothing else's tasks, and no other
worker takes theirs) and reach the test database by `DATABASE_URL`. The kill
test needs Redis: only a broker that keeps unacknowledged messages hands a
dead worker's task to another one (the filesystem transport deletes a message
as it delivers it).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections

from project.celery import app as celery_app
from tests.helpers import generated_sessions
from transcripts import actions
from transcripts.engine import analyze
from transcripts.models import AuditRecord, Job, JobItem, Revision, Session

ROOT = Path(settings.BASE_DIR)
CELERY = Path(sys.executable).parent / "celery"
# Short enough for a dead worker's task to come back within the test, long
# enough for a live worker never to lose one (a chunk takes well under a second).
WORKER_ENV = {"BROKER_VISIBILITY_TIMEOUT": "8", "JOB_CLAIM_LEASE": "4", "JOB_CHUNK_SIZE": "10"}

redis_only = pytest.mark.skipif(
    not settings.CELERY_BROKER_URL.startswith("redis://"),
    reason="needs CELERY_BROKER_URL=redis://...: the filesystem broker drops a message it "
    "delivered to a worker that then dies, so no other worker could finish its task",
)


def database_url() -> str:
    """Return a DATABASE_URL for the test database this process uses."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


class Workers:
    """Start and stop `celery worker` processes on a dedicated queue."""

    def __init__(self, queue: str, logs: Path) -> None:
        self.queue, self.logs = queue, logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            **WORKER_ENV,
            "CELERY_TASK_DEFAULT_QUEUE": queue,
            "DATABASE_URL": database_url(),
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        }

    def start(self, name: str) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            [
                str(CELERY),
                "-A",
                "project",
                "worker",
                "-Q",
                self.queue,
                "-n",
                f"{name}@%h",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.processes[name] = process
        return process

    def kill(self, name: str) -> None:
        """End the worker at once, as a crash or an OOM kill would: no warm shutdown."""
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def freeze_holding_items(self, name: str, job: Job) -> tuple[set[int], uuid.UUID]:
        """Stop worker `name` (SIGSTOP) while it holds a claim; return its open items and the claim.

        A worker claims a chunk of items under one token. Frozen, its claim
        stays put while the other workers' claims move on (a chunk takes well
        under a second): the one claim left unchanged is its own.
        """
        process = self.processes[name]
        for _ in range(50):
            process.send_signal(signal.SIGSTOP)
            held = set(job.items.filter(status="running").values_list("claim", flat=True))
            time.sleep(1)
            still = set(
                job.items.filter(status="running", claim__in=held).values_list("claim", flat=True)
            )
            if len(still) == 1:
                claim = still.pop()
                held_items = job.items.filter(claim=claim, status="running")
                return set(held_items.values_list("pk", flat=True)), claim
            process.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        raise AssertionError(f"{name} never held an item\n{self.log()}")

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def log(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.logs.glob("*.log"))
        )


@pytest.fixture
def workers(transactional_db, tmp_path):
    queue = f"pairfix-real-world-{uuid.uuid4().hex[:8]}"
    # What this process sends (the kickoffs) goes to the workers' queue.
    default_queue = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    logs = tmp_path / "logs"
    logs.mkdir()
    workers = Workers(queue, logs)
    try:
        yield workers
    finally:
        celery_app.conf.task_default_queue = default_queue
        workers.stop_all()
        with celery_app.connection_for_write() as broker:
            broker.default_channel.queue_purge(queue)


def ingest_all(workspace, alice, paths: list[Path]) -> dict[int, object]:
    """Ingest each file; return {session id: its analysis under synthesize}."""
    plans = {}
    for path in paths:
        data = path.read_bytes()
        session = actions.do_ingest_session(workspace, path.name, data, acting_user=alice)
        plans[session.pk] = analyze(data, path.name, "synthesize")
    return plans


def wait_until(predicate, timeout: float, workers: Workers, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{workers.log()}")


def job_status(job: Job) -> Job:
    job.refresh_from_db()
    return job


def audit_keys(job: Job) -> list[tuple]:
    return list(
        AuditRecord.objects.filter(job=job).values_list(
            "session", "op", "fault_kind", "tool_call_id", "record", "block", "anchor", "target"
        )
    )


@redis_only
def test_a_job_survives_a_worker_killed_mid_job(workers, alice, workspace):
    plans = ingest_all(workspace, alice, generated_sessions(500, seed=5))
    faulty = {pk for pk, analysis in plans.items() if analysis.plan}
    assert len(faulty) > 450  # the workload is what the test claims it is
    workers.start("w1")
    workers.start("w2")

    job = actions.do_start_job(
        workspace, Session.objects.all(), policy="synthesize", acting_user=alice
    )
    wait_until(lambda: job_status(job).finished_items >= 100, 120, workers, "100 items")
    orphans, dead_claim = workers.freeze_holding_items("w1", job)
    workers.kill("w1")
    killed_at = job_status(job).finished_items
    workers.start("w3")
    wait_until(lambda: job_status(job).status == "done", 180, workers, "the job to finish")

    assert killed_at < 500, "the job finished before the kill: make the workload bigger"
    # The items the dead worker held unfinished were taken over once its lease had passed.
    taken_over = job.items.filter(pk__in=orphans)
    assert orphans and not taken_over.filter(claim=dead_claim).exists()
    assert set(taken_over.values_list("status", flat=True)) <= {"repaired", "unchanged"}
    assert (job.total, job.done, job.failed, job.fence_lost) == (500, 500, 0, 0)
    statuses = Counter(job.items.values_list("status", flat=True))
    assert statuses == {"repaired": len(faulty), "unchanged": 500 - len(faulty)}
    # Every session repaired exactly once: one new revision, the engine's bytes.
    numbers = Counter(Revision.objects.values_list("session", flat=True))
    assert {pk for pk, n in numbers.items() if n == 2} == faulty
    assert set(numbers.values()) == {1, 2}
    heads = dict(Session.objects.filter(pk__in=faulty).values_list("pk", "head__sha256"))
    assert heads == {pk: hashlib.sha256(plans[pk].repaired).hexdigest() for pk in faulty}
    assert set(Session.objects.filter(pk__in=faulty).values_list("head__number", flat=True)) == {1}
    # No duplicate audit records: one per op of each plan.
    keys = audit_keys(job)
    assert len(keys) == len(set(keys)) == sum(len(plans[pk].plan.ops) for pk in faulty)
    assert Counter(key[0] for key in keys) == {pk: len(plans[pk].plan.ops) for pk in faulty}


def test_two_jobs_on_the_same_sessions_give_no_session_two_revisions(workers, alice, workspace):
    plans = ingest_all(workspace, alice, generated_sessions(100, seed=9))
    faulty = {pk for pk, analysis in plans.items() if analysis.plan}
    workers.start("w1")
    workers.start("w2")
    jobs: list[Job] = []
    barrier = threading.Barrier(2)

    def start(policy: str) -> None:
        try:
            barrier.wait()
            jobs.append(
                actions.do_start_job(
                    workspace, Session.objects.all(), policy=policy, acting_user=alice
                )
            )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=start, args=(p,)) for p in ("synthesize", "discard")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(jobs) == 2
    for job in jobs:
        wait_until(lambda job=job: job_status(job).status == "done", 120, workers, f"job {job.pk}")

    numbers = Counter(Revision.objects.values_list("session", flat=True))
    assert {pk for pk, n in numbers.items() if n == 2} == faulty
    assert max(numbers.values()) == 2
    # Per session, one job wrote and the other found its fence lost.
    outcomes = Counter(JobItem.objects.filter(session__in=faulty).values_list("session", "status"))
    for pk in faulty:
        assert (outcomes[(pk, "repaired")], outcomes[(pk, "fence_lost")]) == (1, 1)
    for job in jobs:
        assert job.done + job.fence_lost == 100 and job.failed == 0
        keys = audit_keys(job)
        assert len(keys) == len(set(keys))
    assert AuditRecord.objects.filter(job__in=jobs).values("session").distinct().count() == len(
        faulty
    )


@pytest.mark.django_db(transaction=True)
def test_nothing_changes_when_the_broker_is_down(alice, workspace, ingest, monkeypatch):
    session = ingest(
        workspace, "a.jsonl", (ROOT / "demo/samples/formats/claude_code.jsonl").read_bytes()
    )
    broken = ingest(workspace, "b.jsonl", b"not json\n")
    repaired = actions.do_start_job(
        workspace, [session, broken], policy="synthesize", acting_user=alice
    )
    for ids in actions.do_fan_out_job(repaired.pk):
        actions.do_run_job_items(repaired.pk, ids)
    repaired.refresh_from_db()
    before = (Job.objects.count(), JobItem.objects.count(), repaired.status, repaired.failed)
    dead = "redis://127.0.0.1:1/0"
    monkeypatch.setattr(celery_app.conf, "broker_url", dead)
    monkeypatch.setenv("CELERY_BROKER_URL", dead)

    message = r"The task queue \(redis://127.0.0.1:1/0\) cannot be reached: .* Nothing was started"
    with pytest.raises(actions.BrokerUnavailable, match=message):
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    with pytest.raises(actions.BrokerUnavailable, match=message):
        actions.do_start_rollback_job(repaired, acting_user=alice)
    with pytest.raises(actions.BrokerUnavailable, match=message):
        actions.do_retry_failed_items(repaired, acting_user=alice)

    repaired.refresh_from_db()
    assert (
        Job.objects.count(),
        JobItem.objects.count(),
        repaired.status,
        repaired.failed,
    ) == before
    assert repaired.items.filter(status="failed").count() == 1
