"""Benchmark: a bulk repair job's sessions per second with one and two workers, next to the core.

Generates sessions with tools/gen_sessions.py (kept under var/workloads), times
the engine alone on them in one process (`analyze`, plus the second pass a job
makes over each repaired file to index the new head's faults), then runs a
repair job over all of them with one `celery worker` process and again, from
scratch, with two. It prints sessions per second for each, the job
system's overhead (engine throughput / job throughput with one worker) and the
scaling from one worker to two.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/jobs.py [--sessions 2000] [--records 200]

It never touches the configured database: on PostgreSQL it (re)creates the
database `<configured name>_bench` on the same server and drops it at the end;
without DATABASE_URL it uses a SQLite file under var/. Blobs go to a temporary folder,
tasks to a queue of their own. A job's time runs from the moment a worker
picks up its kickoff to its last item (the job row's started_at/finished_at).
Each run starts from an empty database and blob folder. DEBUG is False unless set.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUEUE = "pairfix-bench"


def workload(sessions: int, records: int, fault_rate: float, result_bytes: str) -> list[Path]:
    """Return the generated session files, making them (two processes at a time) if needed."""
    out = ROOT / "var" / "workloads" / f"bench-r{records}-n{sessions}-f{fault_rate}-b{result_bytes}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=out.parent))
        shares = [(1, sessions - sessions // 2), (2, sessions // 2)]
        print(f"generating {sessions} sessions of {records} records (once) ...", flush=True)
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tools" / "gen_sessions.py"),
                    "--format",
                    "claude_code",
                    "--records",
                    str(records),
                    "--sessions",
                    str(n),
                    "--fault-rate",
                    str(fault_rate),
                    "--result-bytes",
                    result_bytes,
                    "--seed",
                    str(seed),
                    "--out-dir",
                    str(building / str(seed)),
                ],
                stdout=subprocess.DEVNULL,
            )
            for seed, n in shares
        ]
        if any(p.wait() for p in processes):
            raise SystemExit("gen_sessions.py failed")
        building.rename(out)
    return sorted(out.glob("*/*.jsonl"))


def bench_database_url(server_url: str | None) -> tuple[str, Callable[[], None]]:
    """Create the benchmark's own database; return its URL and a function that drops it.

    On the PostgreSQL server of `server_url`, or in a SQLite file when that is None.
    """
    if not server_url:
        path = ROOT / "var" / "bench.sqlite3"
        path.parent.mkdir(exist_ok=True)

        def remove() -> None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

        remove()
        return f"sqlite:///{path}", remove
    import dj_database_url
    import psycopg

    db = dj_database_url.parse(server_url)
    # Named after the configured database: benchmarks run against other databases don't collide.
    name = f"{db['NAME']}_bench"
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("DATABASE_URL: only PostgreSQL (or nothing, for SQLite) is supported")
    server = {
        "host": db["HOST"] or None,
        "port": db["PORT"] or None,
        "user": db["USER"] or None,
        "password": db["PASSWORD"] or None,
        "dbname": "postgres",
    }

    def run(sql: str) -> None:
        with psycopg.connect(**server, autocommit=True) as connection:
            connection.execute(sql)

    run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    run(f"CREATE DATABASE {name}")
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    url = (
        f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
    )
    return url, lambda: run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def engine_throughput(paths: list[Path], policy: str) -> tuple[float, float, int]:
    """Return (engine-only sessions/s, with the second pass over repaired files, repaired count)."""
    from transcripts.engine import analyze

    first = second = 0.0
    repaired = 0
    for path in paths:
        data = path.read_bytes()
        start = time.perf_counter()
        analysis = analyze(data, path.name, policy)
        first += time.perf_counter() - start
        if analysis.plan:
            repaired += 1
            start = time.perf_counter()
            analyze(analysis.repaired, path.name, policy, format=analysis.format)
            second += time.perf_counter() - start
    return len(paths) / first, len(paths) / (first + second), repaired


def run_job(
    workspace: object, workers: int, env: dict[str, str], policy: str
) -> tuple[float, object]:
    """Run a repair job over every session of `workspace` with `workers` worker processes.

    Return (sessions per second, the finished job).
    """
    from transcripts import actions
    from transcripts.models import Job, Session

    processes = [
        subprocess.Popen(
            [
                str(Path(sys.executable).parent / "celery"),
                "-A",
                "project",
                "worker",
                "-Q",
                QUEUE,
                "-n",
                f"bench{n}@%h",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
        )
        for n in range(workers)
    ]
    try:
        job = actions.do_start_job(
            workspace, Session.objects.filter(workspace=workspace), policy=policy, acting_user=None
        )
        while True:
            job.refresh_from_db()
            if job.status == Job.Status.DONE:
                break
            if any(p.poll() is not None for p in processes):
                raise SystemExit("a worker died")
            time.sleep(0.2)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
    assert job.started_at is not None and job.finished_at is not None
    return job.total / (job.finished_at - job.started_at).total_seconds(), job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--fault-rate", type=float, default=0.02)
    parser.add_argument("--result-bytes", default="100:5000")
    parser.add_argument("--policy", default="synthesize")
    args = parser.parse_args()

    paths = workload(args.sessions, args.records, args.fault_rate, args.result_bytes)
    size = sum(p.stat().st_size for p in paths)
    server_url = os.getenv("DATABASE_URL")
    url, drop = bench_database_url(server_url)
    media = tempfile.mkdtemp(prefix="pairfix-bench-media-")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "MEDIA_ROOT": media,
        "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
        "LOG_LEVEL": "WARNING",
        # As in production: with DEBUG on, Django also keeps a log of every query.
        "DEBUG": os.getenv("DEBUG", "False"),
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from project.celery import app
    from transcripts import actions

    rates = {}
    try:
        print(
            f"{len(paths)} Claude Code sessions, {args.records} records each, "
            f"{size / len(paths) / 1024:.0f} KiB on average; policy {args.policy}; "
            f"{os.cpu_count()} CPUs; "
            f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}, "
            f"broker {app.conf.broker_url.split(':', 1)[0]}; "
            f"chunks of {settings.JOB_CHUNK_SIZE}",
            flush=True,
        )
        engine, engine_two_pass, repaired = engine_throughput(paths, args.policy)
        print(f"{repaired} of {len(paths)} sessions need a repair", flush=True)
        for workers in (1, 2):
            # Each run from scratch: no blob or row left by the other.
            connections.close_all()
            drop()
            url, drop = bench_database_url(server_url)
            shutil.rmtree(media)
            os.mkdir(media)
            call_command("migrate", verbosity=0)
            workspace = actions.do_create_workspace("bench", acting_user=None)
            start = time.perf_counter()
            for path in paths:
                actions.do_ingest_session(workspace, path.name, path.read_bytes(), acting_user=None)
            print(f"ingested in {time.perf_counter() - start:.0f} s", flush=True)
            rates[workers], job = run_job(workspace, workers, env, args.policy)
            assert (job.done, job.failed) == (len(paths), 0), job
    finally:
        with app.connection_for_write() as broker:
            broker.default_channel.queue_purge(QUEUE)
        connections.close_all()
        drop()
        shutil.rmtree(media)

    one, two = rates[1], rates[2]
    rows = [
        ("engine alone, 1 process (analyze)", engine),
        ("engine, with the second pass over repaired files", engine_two_pass),
        ("repair job, 1 worker", one),
        ("repair job, 2 workers", two),
    ]
    print()
    print(f"{'':52} {'sessions/s':>10}")
    for label, rate in rows:
        print(f"{label:52} {rate:10.1f}")
    print()
    print(f"job overhead, 1 worker (engine alone / job):          {engine / one:.2f}")
    print(f"job overhead over the engine's two passes:            {engine_two_pass / one:.2f}")
    print(f"scaling, 2 workers / 1 worker:                         {two / one:.2f}")


if __name__ == "__main__":
    main()
