"""Benchmark-style check: concurrent appends over HTTP, and workers killed mid-job.

Needs PostgreSQL and Redis, as production runs:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/concurrency.py [--appends 50] [--kills 3] [--sessions 300]

1. Serves Pairfix with gunicorn (DEBUG off, 2 workers x 8 threads) and sends
   `--appends` appends at once to one session through the API (half of them
   with `?head=` of the head they all read, so at most one of those may be
   written), then checks the session's bytes hold every written append once.
2. Runs a repair job over `--sessions` generated sessions with two
   `celery worker` processes and SIGKILLs one of them mid-job `--kills` times
   (starting a new one each time), then counts the sessions repaired exactly
   once and the audit records written twice.

It prints: appends written, refused with 409, answered 5xx (must be 0); the
sessions repaired exactly once of those to repair; audit duplicates (must be
0); and exits non-zero when a figure is wrong. It never touches the
configured database: it (re)creates `<configured name>_concurrency` on the
same server and drops it at the end; blobs go to a temporary folder and
tasks to a queue of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from jobs import workload  # noqa: E402  (bench/jobs.py: the generated sessions)

QUEUE = "pairfix-concurrency"
BIN = Path(sys.executable).parent
# Short, so that a killed worker's task comes back within the run (see README, Bulk jobs).
WORKER_ENV = {"BROKER_VISIBILITY_TIMEOUT": "8", "JOB_CLAIM_LEASE": "4", "JOB_CHUNK_SIZE": "10"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, data: bytes, token: str) -> int:
    """POST `data` as JSON lines to `url`; return the status (0 when no answer came)."""
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def line(**fields: Any) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def appended(n: int) -> bytes:
    """Return append `n`'s lines: a Claude Code tool call and its result."""
    call = {"type": "tool_use", "id": f"toolu_c{n}", "name": "Bash", "input": {"command": "ls"}}
    answer = {"type": "tool_result", "tool_use_id": f"toolu_c{n}", "content": f"ok {n}"}
    return line(
        type="assistant",
        uuid=f"a{n}",
        parentUuid=None,
        sessionId="c",
        message={"id": f"msg_{n}", "role": "assistant", "content": [call]},
    ) + line(
        type="user",
        uuid=f"r{n}",
        parentUuid=f"a{n}",
        sessionId="c",
        message={"role": "user", "content": [answer]},
    )


def concurrent_appends(env: dict[str, str], count: int) -> dict[str, int]:
    """Send `count` appends at once through gunicorn; return the counts and check the bytes."""
    from django.contrib.auth import get_user_model

    from transcripts import actions
    from transcripts.models import AuditRecord, Session, Workspace

    workspace = Workspace.objects.get(name="concurrency")
    # A token acts with its creator's role: an editor's may append.
    user = get_user_model().objects.create_user("bench", password=secrets.token_urlsafe())
    actions.do_add_member(workspace, user, role="editor", acting_user=None)
    start = line(type="user", uuid="u0", parentUuid=None, sessionId="c", message={"content": "go"})
    session = actions.do_ingest_session(workspace, "appended.jsonl", start, acting_user=user)
    _, token = actions.do_create_api_token(workspace, "bench", acting_user=user)
    port = free_port()
    server = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "project.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "8",
            "--worker-class",
            "gthread",
        ],
        cwd=ROOT,
        env={**env, "ALLOWED_HOSTS": "127.0.0.1", "SECURE_SSL_REDIRECT": "False"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=10) as health:
                    if health.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("gunicorn did not come up")
            time.sleep(0.2)
        barrier = threading.Barrier(count)
        url = f"{base}/api/sessions/{session.pk}/records"

        def send(n: int) -> tuple[int, int]:
            barrier.wait(timeout=60)
            # Every other append only if revision 0 is still the head: one of them at most.
            return n, post(url + ("?head=0" if n % 2 else ""), appended(n), token)

        with ThreadPoolExecutor(count) as pool:
            answers = dict(pool.map(send, range(count)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    statuses = Counter(answers.values())
    session = Session.objects.get(pk=session.pk)
    assert session.head is not None
    content = session.head.read()
    written = [n for n, status in answers.items() if status == 200]
    missing = [n for n in written if content.count(appended(n)) != 1]
    extra = [n for n, status in answers.items() if status != 200 and appended(n) in content]
    appends = AuditRecord.objects.filter(session=session, op="append").count()
    return {
        "sent": count,
        "written": len(written),
        "refused_409": statuses[409],
        "5xx": sum(n for status, n in statuses.items() if status >= 500 or status == 0),
        "other": sum(n for s, n in statuses.items() if s not in (200, 409) and 0 < s < 500),
        "statuses": dict(statuses),
        "head": session.head.number,
        "audit_appends": appends,
        "lines_wrong": len(missing) + len(extra),
    }


class Workers:
    """`celery worker` processes (solo pool) on the benchmark's queue."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {**env, **WORKER_ENV}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        process = subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "project",
                "worker",
                "-Q",
                QUEUE,
                "-n",
                f"concurrency{self.started}@%h",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "ERROR",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
        )
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            process.wait(timeout=60)


def killed_workers(env: dict[str, str], paths: list[Path], kills: int) -> dict[str, int]:
    """Run a repair job with two workers, SIGKILL one mid-job `kills` times; count the outcome."""
    from django.db.models import Count

    from transcripts import actions
    from transcripts.models import AuditRecord, Job, Revision, Session, Workspace

    workspace = Workspace.objects.get(name="concurrency")
    sessions = [
        actions.do_ingest_session(workspace, p.name, p.read_bytes(), acting_user=None)
        for p in paths
    ]
    workers = Workers(env)
    victim = workers.start()
    workers.start()
    done_kills = 0
    try:
        time.sleep(5)  # both connected to the broker
        job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=None)
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.status == Job.Status.DONE:
                break
            # Kill at evenly spaced points of progress, while the victim holds items.
            due = job.total * (done_kills + 1) // (kills + 1)
            if done_kills < kills and job.finished_items >= due:
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                done_kills += 1
                victim = workers.start()
            time.sleep(0.05)
        else:
            raise SystemExit(f"the job did not finish: {job.finished_items} of {job.total}")
    finally:
        workers.stop()
    to_repair = job.items.exclude(status="unchanged").count()
    repairs = Counter(
        Revision.objects.filter(session__in=sessions, origin="repair")
        .values("session")
        .annotate(n=Count("pk"))
        .values_list("n", flat=True)
    )
    key = ("session", "op", "fault_kind", "tool_call_id", "record", "block", "anchor", "target")
    duplicates = sum(
        row["n"] - 1
        for row in AuditRecord.objects.filter(job=job)
        .values(*key)
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    )
    return {
        "sessions": len(sessions),
        "kills": done_kills,
        "workers_started": workers.started,
        "to_repair": to_repair,
        "repaired_once": repairs[1],
        "repaired_more": sum(n for times, n in repairs.items() if times > 1),
        "failed": job.failed,
        "fence_lost": job.fence_lost,
        "audit_duplicates": duplicates,
        "heads_moved": Session.objects.filter(pk__in=[s.pk for s in sessions], head__number=1)
        .exclude(head__origin="repair")
        .count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--records", type=int, default=200)
    args = parser.parse_args()

    import dj_database_url

    configured = os.getenv("DATABASE_URL", "")
    db = dj_database_url.parse(configured) if configured else {}
    broker = os.getenv("CELERY_BROKER_URL", "")
    if db.get("ENGINE") != "django.db.backends.postgresql" or not broker.startswith("redis://"):
        raise SystemExit("set DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://...")
    paths = workload(args.sessions, args.records, 0.02, "100:5000")
    name = f"{db['NAME']}_concurrency"
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    server = f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    media = Path(tempfile.mkdtemp(prefix="pairfix-concurrency-"))
    env = {
        **os.environ,
        "DATABASE_URL": f"{server}/{name}",
        "MEDIA_ROOT": str(media),
        "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
        "LOG_LEVEL": "ERROR",
        "DEBUG": "False",
        "SECRET_KEY": os.getenv("SECRET_KEY") or secrets.token_urlsafe(50),
    }
    import psycopg

    admin = {"conninfo": f"{server}/postgres", "autocommit": True}
    with psycopg.connect(**admin) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {name}")
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from project.celery import app
    from transcripts import actions

    try:
        call_command("migrate", verbosity=0)
        actions.do_create_workspace("concurrency", acting_user=None)
        appends = concurrent_appends(env, args.appends)
        print(
            f"{appends['sent']} concurrent appends to one session (half with ?head=0): "
            f"{appends['written']} written, {appends['refused_409']} refused with 409, "
            f"{appends['5xx']} 5xx, {appends['other']} other (statuses {appends['statuses']}); "
            f"head revision {appends['head']}, "
            f"{appends['audit_appends']} append audit records, "
            f"{appends['lines_wrong']} appends whose lines are missing, doubled or stray",
            flush=True,
        )
        kills = killed_workers(env, paths, args.kills)
        print(
            f"repair job over {kills['sessions']} sessions, {kills['kills']} SIGKILLs of a worker "
            f"mid-job ({kills['workers_started']} workers started): "
            f"{kills['repaired_once']} of {kills['to_repair']} sessions to repair repaired "
            f"exactly once, {kills['repaired_more']} more than once, {kills['failed']} failed, "
            f"{kills['fence_lost']} fence lost; audit duplicates {kills['audit_duplicates']}",
            flush=True,
        )
    finally:
        with app.connection_for_write() as channel:
            channel.default_channel.queue_purge(QUEUE)
        connections.close_all()
        with psycopg.connect(**admin) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        shutil.rmtree(media)
    wrong = (
        appends["5xx"]
        or appends["other"]
        or appends["lines_wrong"]
        or appends["written"] != appends["head"]
        or appends["audit_appends"] != appends["written"]
        or appends["written"] + appends["refused_409"] != appends["sent"]
        or kills["repaired_once"] != kills["to_repair"]
        or kills["repaired_more"]
        or kills["audit_duplicates"]
    )
    if wrong:
        raise SystemExit("FAILED: a figure above is wrong")
    print("OK")


if __name__ == "__main__":
    main()
