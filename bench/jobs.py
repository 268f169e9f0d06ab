"""Benchmark: a bulk repair job's sessions per second with one and two workers, next to the core.

Generates sessions with tools/gen_sessions.py (kept under var/workloads) and
ingests them once into a database of the benchmark's own. Then, each round:
times the engine alone on the same files in this process (`analyze` with the
format known, as a job passes it: parse, detect, plan, render; the bytes
already in memory, no database, no blob storage), then runs a repair job
over all the sessions with one `celery worker` process, and again with two,
each from a fresh copy of the ingested database and blob folder. A job's
time runs from the moment a worker picks up its kickoff to its last item
(the job row's started_at/finished_at).

It prints each round and the range over rounds: sessions per second of the
engine and of each job; the job system's overhead, engine alone / job with one
worker (all a job adds to `analyze`: reading the base blob, the new head's
fault counts, storing the repaired blob, claims, revisions, audit records and
counters in the database, the broker, and the database server's share of the
CPUs); the scaling from one worker to two; and the CPU seconds per session of
the engine and of the worker processes, which other load on the machine
disturbs less than wall time (they leave out the database server and broker).
A job reads only the sessions with a fault (`runner.left_as_found`), so the
workers' CPU is also given against the engine's on those sessions alone.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/jobs.py [--sessions 2000] [--records 200] [--rounds 3]

With `--storage s3` the blobs live in a bucket of moto's S3 API, served on
127.0.0.1 (the first free port of `--s3-ports`, 9100-9139 unless told), and
the workers read and write them over HTTP (the client of the hashed GETs and
single PUTs is obstore unless STORAGE_CLIENT=boto3 is set, as in
transcripts/storage.py); each run starts from the ingested
bucket (the blobs a run added are deleted). gunicorn serves it, keeping each
connection open between requests as a real S3 endpoint does
(bench/moto_wsgi.py); `--s3-latency MS` holds each request that long
before moto serves it, as a real S3's round trip would, at no CPU cost.
`--s3-server moto` runs moto's own server instead, which closes the
connection after every answer, so that each request also pays a new
connection. The in-process run counts the S3 requests a session
costs, by operation, and the connections opened. The default storage,
`local`, keeps the blobs in a folder.

`--variant NAME=VALUE` (repeatable) adds, to each round, a run with one
worker whose environment also sets those variables (JOB_CHUNK_SIZE=20, say),
right after the round's own run with one worker, from the same fresh copy:
a change is judged against a run made minutes apart, under the same load,
not against another day's figures.

It never touches the configured database: on PostgreSQL it (re)creates the
databases `<configured name>_bench` (the ingested sessions) and
`<configured name>_bench_run` (each run's copy) on the same server and drops
them at the end; without DATABASE_URL it uses SQLite files under var/. Blobs
go to temporary folders, tasks to a queue of their own. DEBUG is False unless set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUEUE = "pairfix-bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


class Databases:
    """The benchmark's databases: one holding the ingested sessions, and each run's copy of it.

    On the PostgreSQL server of `server_url`, or in SQLite files when that is None.
    """

    def __init__(self, server_url: str | None) -> None:
        self.postgres = bool(server_url)
        if not server_url:
            var = ROOT / "var"
            var.mkdir(exist_ok=True)
            self.base, self.copy = str(var / "bench.sqlite3"), str(var / "bench-run.sqlite3")
            self.drop()
            return
        import dj_database_url

        db = dj_database_url.parse(server_url)
        if db["ENGINE"] != "django.db.backends.postgresql":
            raise SystemExit("DATABASE_URL: only PostgreSQL (or nothing, for SQLite) is supported")
        # Named after the configured database: benchmarks run against other databases don't collide.
        self.base, self.copy = f"{db['NAME']}_bench", f"{db['NAME']}_bench_run"
        self.server = {
            "host": db["HOST"] or None,
            "port": db["PORT"] or None,
            "user": db["USER"] or None,
            "password": db["PASSWORD"] or None,
            "dbname": "postgres",
        }
        password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
        self.prefix = f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:"
        self.prefix += f"{db['PORT'] or 5432}/"
        self.drop()
        self._sql(f"CREATE DATABASE {self.base}")

    def url(self, name: str) -> str:
        """Return the DATABASE_URL of the database `name` (self.base or self.copy)."""
        return self.prefix + name if self.postgres else f"sqlite:///{name}"

    def fresh_copy(self) -> None:
        """Make self.copy a copy of self.base (no connection to either may be open)."""
        if self.postgres:
            self._sql(f"DROP DATABASE IF EXISTS {self.copy} WITH (FORCE)")
            self._sql(f"CREATE DATABASE {self.copy} TEMPLATE {self.base}")
        else:
            self._remove(self.copy)
            shutil.copyfile(self.base, self.copy)

    def drop(self) -> None:
        for name in (self.base, self.copy):
            if self.postgres:
                self._sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            else:
                self._remove(name)

    def _sql(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(**self.server, autocommit=True) as connection:
            connection.execute(sql)

    @staticmethod
    def _remove(path: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


class S3Server:
    """moto's S3 API on 127.0.0.1, with one bucket; `url` is its STORAGE_URL.

    With `keep_alive`, served by gunicorn's threaded worker (bench/moto_wsgi.py),
    which keeps a connection open between requests as a real S3 endpoint does;
    otherwise by moto's own server, which closes it after every answer.
    """

    BUCKET = "pairfix-bench"

    def __init__(self, ports: range, *, keep_alive: bool = True, latency: float = 0) -> None:
        import socket
        import urllib.request

        for port in ports:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
                break
        else:
            raise SystemExit(f"no free port in {ports.start}-{ports.stop - 1} for the S3 server")
        self.endpoint = f"http://127.0.0.1:{port}"
        if keep_alive:
            # One process (moto holds the buckets in its memory), a thread per connection
            # at work; an idle connection stays open for a minute. With a latency, more
            # threads: each request holds one while it waits.
            command = [
                str(Path(sys.executable).with_name("gunicorn")),
                "--chdir",
                str(ROOT / "bench"),
                "--bind",
                f"127.0.0.1:{port}",
                "--worker-class",
                "gthread",
                "--workers",
                "1",
                "--threads",
                "32" if latency else "8",
                "--keep-alive",
                "60",
                "moto_wsgi:app",
            ]
        else:
            if latency:
                raise SystemExit("--s3-latency needs the keep-alive server")
            command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1"]
            command += ["-p", str(port)]
        self.process = subprocess.Popen(
            command,
            env={**os.environ, "BENCH_S3_LATENCY_MS": str(latency)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit("the S3 server did not start") from None
                time.sleep(0.1)
        self.client().create_bucket(Bucket=self.BUCKET)
        self.url = f"s3://bench:bench@{self.BUCKET}?endpoint_url={self.endpoint}&region=us-east-1"

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        )

    def keys(self) -> set[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.BUCKET)
        return {obj["Key"] for page in pages for obj in page.get("Contents", [])}

    def keep_only(self, keys: set[str]) -> None:
        """Delete every object of the bucket whose key is not in `keys`."""
        extra = sorted(self.keys() - keys)
        for start in range(0, len(extra), 1000):
            self.client().delete_objects(
                Bucket=self.BUCKET,
                Delete={"Objects": [{"Key": key} for key in extra[start : start + 1000]]},
            )

    def cpu(self) -> float:
        """Return the CPU seconds the server's processes (gunicorn's worker too) have used."""
        pids = [self.process.pid]
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        with contextlib.suppress(OSError):
            pids += [int(pid) for pid in children.read_text().split()]
        return sum(cpu_seconds(pid) for pid in pids)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # gunicorn waiting out a client's kept-alive connection
            self.process.kill()
            self.process.wait(timeout=10)


def use_database(name: str) -> None:
    """Point this process's Django connection at the database `name`."""
    from django.db import connections

    connections.close_all()
    connections["default"].settings_dict["NAME"] = name


@dataclass
class Engine:
    """The engine alone on the bench's files, as a repair job asks it (see `engine_throughput`)."""

    rate: float  # sessions/s by the clock, `analyze` alone
    rate_with_counts: float  # sessions/s, with the new head's counts
    cpu: float  # CPU s per session: `analyze` (its render included) and the counts
    repaired: int  # sessions whose plan is not empty
    render: float  # CPU s per session of a second render of the repaired files (to memory)
    faulty: int  # sessions with a fault (the ones a job reads)
    faulty_cpu: float  # CPU s of the engine on those, per session of all


def engine_throughput(paths: list[Path], policy: str) -> Engine:
    """Return the engine alone on `paths` under `policy`, the bytes in memory.

    What a repair job asks of the core for each session: `analyze` with the
    session's format known (as a job passes it), which renders the repair,
    and `repaired_counts` for each repaired one. CPU is also summed over
    the sessions with a fault, the only ones a job reads (`left_as_found`).
    """
    import io

    from transcripts.engine import analyze

    files = [(path.name, path.read_bytes()) for path in paths]
    wall = counts = 0.0
    repaired = faulty = 0
    render = faulty_cpu = 0.0
    cpu = time.process_time()
    for name, data in files:
        start_cpu = time.process_time()
        start = time.perf_counter()
        analysis = analyze(data, name, policy, format="claude_code")
        wall += time.perf_counter() - start
        if analysis.plan:
            repaired += 1
            start = time.perf_counter()
            analysis.repaired_counts()
            counts += time.perf_counter() - start
        if analysis.faults:
            faulty += 1
            faulty_cpu += time.process_time() - start_cpu
        if analysis.plan:
            start_cpu = time.process_time()
            analysis.write_repaired(io.BytesIO())
            render += time.process_time() - start_cpu
    cpu = time.process_time() - cpu - render
    n = len(files)
    return Engine(
        n / wall, n / (wall + counts), cpu / n, repaired, render / n, faulty, faulty_cpu / n
    )


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU seconds process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_idle(processes: list[subprocess.Popen[bytes]]) -> None:
    """Wait until the workers have started: their CPU time stops growing."""
    deadline = time.monotonic() + 120
    last = None
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise SystemExit("a worker died")
        now = [cpu_seconds(p.pid) for p in processes]
        if now == last:
            return
        last = now
        time.sleep(0.5)
    raise SystemExit("the workers did not settle")


@dataclass
class Run:
    rate: float  # sessions per second
    cpu: float  # CPU seconds of the worker processes per session
    database: float  # CPU seconds of the database server's backends for the workers, per session
    storage: float  # CPU seconds of the S3 server per session (0 for local storage)


def run_job(
    workspace: Any,
    workers: int,
    env: dict[str, str],
    policy: str,
    database: str | None,
    s3: S3Server | None,
) -> Run:
    """Run a repair job over every session of `workspace` with `workers` worker processes.

    `database` is the name of the PostgreSQL database the workers use, to
    read its backends' CPU (None: not measured); `s3`, the S3 server the
    blobs are on, to read its CPU (None: local storage).
    """
    from django.db import connection

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
                "ERROR",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for n in range(workers)
    ]
    try:
        wait_idle(processes)
        cpu = sum(cpu_seconds(p.pid) for p in processes)
        storage = s3.cpu() if s3 is not None else 0.0
        job = actions.do_start_job(
            workspace, Session.objects.filter(workspace=workspace), policy=policy, acting_user=None
        )
        # The workers' backends serve this job alone (the copy was made for it); a
        # worker may close its connection after a task, so they are looked at each poll.
        backends: dict[int, float] = {}
        while True:
            job.refresh_from_db()
            if database:
                backends.update(database_cpu(database, connection.connection.info.backend_pid))
            if job.status == Job.Status.DONE:
                break
            if any(p.poll() is not None for p in processes):
                raise SystemExit("a worker died")
            time.sleep(0.1)
        cpu = sum(cpu_seconds(p.pid) for p in processes) - cpu
        storage = s3.cpu() - storage if s3 is not None else 0.0
        db_cpu = sum(backends.values())
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
    assert job.started_at is not None and job.finished_at is not None
    assert (job.done, job.failed) == (job.total, 0), job
    seconds = (job.finished_at - job.started_at).total_seconds()
    return Run(job.total / seconds, cpu / job.total, db_cpu / job.total, storage / job.total)


@dataclass
class Breakdown:
    """Where a repair job's time goes, per session, measured in this process (seconds)."""

    sessions: int
    wall: float
    cpu: float
    queries: int
    database: float  # waiting for the database: every round trip, from send to result
    engine: float  # analyze and render the repaired file
    counts: float  # the new head's fault counts (`repaired_counts`)
    blob_read: float  # opening the base revision's blob (reading it, when it is read whole)
    blob_write: float  # hashing and storing the repaired blob
    # The same, in the blob threads that read ahead and store behind (runner.ChunkBlobs,
    # S3 only): overlapped with the job's own thread, so not part of its clock above.
    behind_read: float
    behind_write: float
    requests: Counter[str]  # S3 requests by operation (GetObject, PutObject, HeadObject, ...)
    connections: int  # connections the S3 client opened

    def per_session(self, seconds: float) -> float:
        return seconds / self.sessions * 1000


def breakdown(workspace: Any, policy: str) -> Breakdown:
    """Run a repair job of `workspace` in this process, timing what it spends where.

    The job's tasks are not sent to a worker: this process fans it out and
    runs each chunk as a worker would (the same actions), with timers around
    the engine, the blob storage calls and every database round trip; on S3,
    it counts the requests sent, by operation, and the connections opened.
    Each part's time is that of the job's own thread (waiting for a read
    ahead or a store behind counts as blob I/O); the blob threads' own time
    is summed apart (`behind_read`, `behind_write`), as it overlaps the rest.
    """
    from botocore.awsrequest import AWSHTTPConnection, AWSHTTPSConnection
    from django.core.files.storage import default_storage
    from django.db import connection

    from transcripts import actions
    from transcripts.actions import common, runner
    from transcripts.engine import Analysis
    from transcripts.models import Job, Revision, Session
    from transcripts.storage import ObjectStoreClient

    spent: dict[str, float] = dict.fromkeys(
        ("database", "engine", "counts", "blob_read", "blob_write"), 0.0
    )
    behind = dict.fromkeys(("blob_read", "blob_write"), 0.0)
    behind_lock = threading.Lock()
    job_thread = threading.get_ident()
    queries = 0
    # Per thread, the time of the timed calls under way, innermost last: each part's time is
    # its own, less that of the parts it calls (storing the repair renders it, in the engine).
    calls = threading.local()

    def under_way() -> list[float]:
        if not hasattr(calls, "inner"):
            calls.inner = []
        inner: list[float] = calls.inner
        return inner

    def timed(key: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            inner = under_way()
            start = time.perf_counter()
            inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                own = elapsed - inner.pop()
                if threading.get_ident() == job_thread:
                    spent[key] += own
                else:
                    with behind_lock:
                        behind[key] += own
                if inner:
                    inner[-1] += elapsed

        return wrapper

    def timed_context(key: str, function: Any) -> Any:
        # A context manager's work is in entering it (opening the blob), not in calling it.
        @contextlib.contextmanager
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            with function(*args, **kwargs) as value:
                elapsed = time.perf_counter() - start
                spent[key] += elapsed
                inner = under_way()
                if inner:
                    inner[-1] += elapsed
                yield value

        return wrapper

    def on_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal queries
        queries += 1
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - start
            spent["database"] += elapsed
            inner = under_way()
            if inner:
                inner[-1] += elapsed

    requests: Counter[str] = Counter()
    connections = 0

    def on_send(event_name: str, **kwargs: Any) -> None:
        with behind_lock:  # from the blob threads too
            requests[event_name.rsplit(".", 1)[1]] += 1  # before-send.s3.GetObject: each attempt

    def counted_connect(connect: Any) -> Any:
        def wrapper(self: Any) -> Any:
            nonlocal connections
            connections += 1
            return connect(self)

        return wrapper

    def counted_request(operation: str, method: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with behind_lock:  # from the blob threads too
                requests[operation] += 1  # one request of obstore's (its retries not seen)
            return method(*args, **kwargs)

        return wrapper

    # The S3 clients whose requests are counted: one per thread (the job's, and its blob
    # threads': runner.ChunkBlobs), each hooked when first used.
    clients: list[Any] = []

    def counted_requests(connection_of: property) -> property:
        assert connection_of.fget is not None

        def hooked(self: Any) -> Any:
            connection = connection_of.fget(self)
            client = connection.meta.client
            if all(client is not seen for seen in clients):
                client.meta.events.register("before-send.s3", on_send, unique_id="bench-requests")
                clients.append(client)
            return connection

        return property(hooked)

    storage_class = default_storage.__class__  # the storage itself, not its lazy wrapper
    fast = ObjectStoreClient
    patches = [
        (fast, "get", counted_request("GetObject", fast.get)),
        (fast, "put", counted_request("PutObject", fast.put)),
        (fast, "size", counted_request("HeadObject", fast.size)),
        (AWSHTTPConnection, "connect", counted_connect(AWSHTTPConnection.connect)),
        (AWSHTTPSConnection, "connect", counted_connect(AWSHTTPSConnection.connect)),
        (common, "analyze", timed("engine", common.analyze)),
        (Analysis, "write_repaired", timed("engine", Analysis.write_repaired)),
        (Analysis, "repaired_counts", timed("counts", Analysis.repaired_counts)),
        (Revision, "source", timed_context("blob_read", Revision.source)),
        (common, "read_revision", timed("blob_read", common.read_revision)),
        (runner, "store_repaired", timed("blob_write", runner.store_repaired)),
        # Reading ahead and storing behind (S3): the waits in the job's thread, and the
        # requests in the blob threads.
        (runner, "read_revision", timed("blob_read", runner.read_revision)),
        (runner.ChunkBlobs, "base", timed("blob_read", runner.ChunkBlobs.base)),
        (runner.ChunkBlobs, "store", timed("blob_write", runner.ChunkBlobs.store)),
        (runner.ChunkBlobs, "settle", timed("blob_write", runner.ChunkBlobs.settle)),
        (storage_class, "save", timed("blob_write", storage_class.save)),
    ]
    if hasattr(default_storage, "bucket_name"):
        patches.append((storage_class, "connection", counted_requests(storage_class.connection)))
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    job = actions.do_start_job(
        workspace, Session.objects.filter(workspace=workspace), policy=policy, acting_user=None
    )
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        with connection.execute_wrapper(on_query):
            for item_ids in runner.do_fan_out_job(job.pk):
                assert runner.do_run_job_items(job.pk, item_ids) == []
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
        for client in clients:
            client.meta.events.unregister("before-send.s3", unique_id="bench-requests")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.done) == (Job.Status.DONE, job.total), job
    return Breakdown(
        job.total,
        wall,
        cpu,
        queries,
        **spent,
        behind_read=behind["blob_read"],
        behind_write=behind["blob_write"],
        requests=requests,
        connections=connections,
    )


def database_cpu(name: str, exclude: int) -> dict[int, float]:
    """Return {pid: CPU seconds so far} of the database server's backends serving database `name`.

    PostgreSQL on this machine only (its processes readable in /proc): the
    backends of the run's workers, not `exclude` (this process's own).
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", [name, exclude]
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # on another machine, or gone
            found[pid] = cpu_seconds(pid)
    return found


def spread(values: list[float], digits: int = 1) -> str:
    """Return "low–high" (or the one value) of `values`."""
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if low == high else f"{low:.{digits}f}–{high:.{digits}f}"


def port_range(text: str) -> range:
    """Return the ports of "LOW-HIGH" (both included) as a range."""
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--fault-rate", type=float, default=0.02)
    parser.add_argument("--result-bytes", default="100:5000")
    parser.add_argument("--policy", default="synthesize")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--storage", choices=["local", "s3"], default="local", help="Where the blobs live."
    )
    parser.add_argument(
        "--s3-ports",
        type=port_range,
        default=range(9100, 9140),
        metavar="LOW-HIGH",
        help="Ports to start the S3 server on, the first free one (default 9100-9139).",
    )
    parser.add_argument(
        "--s3-server",
        choices=["keep-alive", "moto"],
        default="keep-alive",
        help="Serve moto's S3 API with gunicorn, keeping connections open as S3 does "
        "(keep-alive, the default), or with moto's own server, which closes each one (moto).",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Also run one worker with this environment variable set, each round.",
    )
    parser.add_argument(
        "--s3-latency",
        type=float,
        default=0,
        metavar="MS",
        help="Hold each S3 request this many milliseconds before serving it, as a real "
        "S3's round trip would (default 0).",
    )
    args = parser.parse_args()
    variant = dict(pair.split("=", 1) for pair in args.variant)
    if any(not name for name in variant):
        parser.error("--variant takes NAME=VALUE")

    paths = workload(args.sessions, args.records, args.fault_rate, args.result_bytes)
    size = sum(p.stat().st_size for p in paths)
    databases = Databases(os.getenv("DATABASE_URL"))
    media = Path(tempfile.mkdtemp(prefix="pairfix-bench-media-"))
    base_media, run_media = media / "base", media / "run"
    env = {
        **os.environ,
        "DATABASE_URL": databases.url(databases.base),
        "MEDIA_ROOT": str(base_media),
        "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
        "LOG_LEVEL": "ERROR",
        # As in production: with DEBUG on, Django also keeps a log of every query.
        "DEBUG": os.getenv("DEBUG", "False"),
        "SECRET_KEY": os.getenv("SECRET_KEY") or secrets.token_urlsafe(50),
    }
    s3 = None
    if args.storage == "s3":
        s3 = S3Server(
            args.s3_ports, keep_alive=args.s3_server == "keep-alive", latency=args.s3_latency
        )
    if s3 is not None:
        env["STORAGE_URL"] = s3.url
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.test.utils import override_settings

    from project.celery import app
    from transcripts import actions
    from transcripts.models import Workspace

    rows: list[tuple[float, float, float, float, Run, Run]] = []
    variants: list[tuple[Run, Run]] = []  # per round: the run with one worker, the variant's
    engines_read: list[float] = []
    breakdowns: list[Breakdown] = []
    renders: list[float] = []
    try:
        print(
            f"{len(paths)} Claude Code sessions, {args.records} records each, "
            f"{size / len(paths) / 1024:.0f} KiB on average; policy {args.policy}; "
            f"{os.cpu_count()} CPUs; "
            f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}, "
            f"broker {app.conf.broker_url.split(':', 1)[0]}; "
            f"chunks of {settings.JOB_CHUNK_SIZE}; storage {args.storage}"
            + (
                f" ({args.s3_server} server, client {os.getenv('STORAGE_CLIENT', 'obstore')}"
                + (f", {args.s3_latency:g} ms a request" if args.s3_latency else "")
                + ")"
                if s3 is not None
                else ""
            ),
            flush=True,
        )
        call_command("migrate", verbosity=0)
        workspace = actions.do_create_workspace("bench", acting_user=None)
        start = time.perf_counter()
        for path in paths:
            actions.do_ingest_session(workspace, path.name, path.read_bytes(), acting_user=None)
        print(f"ingested once, in {time.perf_counter() - start:.0f} s", flush=True)
        ingested = s3.keys() if s3 is not None else set()
        print()
        header = (
            f"{'round':>5} {'engine/s':>9} {'+counts/s':>9} {'1 worker':>9} {'2 workers':>9} "
            f"{'overhead':>8} {'scaling':>7} {'CPU ms/session: engine, job':>28} "
            f"{'database CPU ms/session':>24}"
        )
        print(header, flush=True)
        for n in range(1, args.rounds + 1):
            alone = engine_throughput(paths, args.policy)
            engine, with_counts, engine_cpu = alone.rate, alone.rate_with_counts, alone.cpu
            repaired, faulty = alone.repaired, alone.faulty
            renders.append(alone.render)
            engines_read.append(alone.faulty_cpu)
            runs: dict[int | str, Run] = {}
            for workers in (0, 1, "variant", 2) if variant else (0, 1, 2):
                # Each run from the ingested state: no revision, blob or row left by another.
                use_database(databases.copy)
                databases.fresh_copy()
                shutil.rmtree(run_media, ignore_errors=True)
                shutil.copytree(base_media, run_media)
                if s3 is not None:
                    s3.keep_only(ingested)
                run_env = {
                    **env,
                    "DATABASE_URL": databases.url(databases.copy),
                    "MEDIA_ROOT": str(run_media),
                    **(variant if workers == "variant" else {}),
                }
                copy = Workspace.objects.get(pk=workspace.pk)
                if workers == 0:
                    # In this process, timed part by part: where the job's time goes.
                    with override_settings(MEDIA_ROOT=str(run_media)):
                        breakdowns.append(breakdown(copy, args.policy))
                    with app.connection_for_write() as broker:
                        broker.default_channel.queue_purge(QUEUE)  # its kickoff, never run
                else:
                    name = databases.copy if databases.postgres else None
                    count = 1 if workers == "variant" else int(workers)
                    runs[workers] = run_job(copy, count, run_env, args.policy, name, s3)
                use_database(databases.base)
            one, two = runs[1], runs[2]
            rows.append((engine, with_counts, engine_cpu, engine / one.rate, one, two))
            if variant:
                variants.append((one, runs["variant"]))
            print(
                f"{n:>5} {engine:9.1f} {with_counts:9.1f} {one.rate:9.1f} {two.rate:9.1f} "
                f"{engine / one.rate:8.2f} {two.rate / one.rate:7.2f} "
                f"{engine_cpu * 1000:14.2f}, {one.cpu * 1000:5.2f} (1), {two.cpu * 1000:5.2f} (2) "
                f"{one.database * 1000:9.2f}, {two.database * 1000:5.2f}",
                flush=True,
            )
    finally:
        with app.connection_for_write() as broker:
            broker.default_channel.queue_purge(QUEUE)
        connections.close_all()
        databases.drop()
        shutil.rmtree(media)
        if s3 is not None:
            s3.stop()

    engines = [r[0] for r in rows]
    ones = [r[4].rate for r in rows]
    twos = [r[5].rate for r in rows]
    print()
    print(
        f"{repaired} of {len(paths)} sessions need a repair, {faulty} have a fault: a job reads "
        f"those and leaves the other {len(paths) - faulty} unread (their counts show no fault); "
        f"{len(rows)} rounds (low–high):"
    )
    print(f"engine alone, 1 process (analyze), sessions/s:        {spread(engines)}")
    print(f"engine + the new head's counts, sessions/s:           {spread([r[1] for r in rows])}")
    print(f"repair job, 1 worker, sessions/s:                     {spread(ones)}")
    print(f"repair job, 2 workers, sessions/s:                    {spread(twos)}")
    overheads = [r[3] for r in rows]
    print(f"job overhead, 1 worker (engine alone / job):          {spread(overheads, 2)}")
    print(
        "scaling, 2 workers / 1 worker:                        "
        f"{spread([two / one for one, two in zip(ones, twos, strict=True)], 2)}"
    )
    print(
        "CPU per session, job worker / engine alone:          "
        f"{spread([r[4].cpu / r[2] for r in rows], 2)} (1 worker), "
        f"{spread([r[5].cpu / r[2] for r in rows], 2)} (2 workers) "
        "(the worker processes only: not the database server or the broker)"
    )
    print(
        "the same, against the engine on the sessions it reads: "
        f"{spread([r[4].cpu / e for r, e in zip(rows, engines_read, strict=True)], 2)} "
        f"(1 worker), "
        f"{spread([r[5].cpu / e for r, e in zip(rows, engines_read, strict=True)], 2)} "
        f"(2 workers); the engine on them: {spread([e * 1000 for e in engines_read], 2)} "
        "ms CPU per session of all"
    )
    print(
        "the same, against the engine with its render:        "
        f"{spread([r[4].cpu / (r[2] + g) for r, g in zip(rows, renders, strict=True)], 2)} "
        f"(1 worker), "
        f"{spread([r[5].cpu / (r[2] + g) for r, g in zip(rows, renders, strict=True)], 2)} "
        f"(2 workers); rendering the repaired files: {spread([g * 1000 for g in renders], 2)} "
        "ms CPU per session"
    )
    print(
        "CPU ms per session, engine / 1 worker / 2 workers:   "
        f"{spread([r[2] * 1000 for r in rows], 2)} / {spread([r[4].cpu * 1000 for r in rows], 2)}"
        f" / {spread([r[5].cpu * 1000 for r in rows], 2)}"
    )
    if databases.postgres:
        print(
            "database server CPU ms per session (its backends):   "
            f"{spread([r[4].database * 1000 for r in rows], 2)} (1 worker), "
            f"{spread([r[5].database * 1000 for r in rows], 2)} (2 workers); "
            "share of worker + database CPU: "
            f"{spread([r[4].database / (r[4].database + r[4].cpu) * 100 for r in rows], 0)} %"
        )
    if s3 is not None:
        print(
            "S3 server CPU ms per session (moto, on the same CPUs): "
            f"{spread([r[4].storage * 1000 for r in rows], 2)} (1 worker), "
            f"{spread([r[5].storage * 1000 for r in rows], 2)} (2 workers)"
        )
    if variants:
        label = " ".join(f"{name}={value}" for name, value in variant.items())
        print(
            f"variant, 1 worker, with {label}: sessions/s "
            f"{spread([v.rate for _, v in variants])} "
            f"(against {spread([b.rate for b, _ in variants])} without), "
            f"{spread([v.rate / b.rate for b, v in variants], 2)} of its rate; "
            f"CPU ms per session {spread([v.cpu * 1000 for _, v in variants], 2)} "
            f"(against {spread([b.cpu * 1000 for b, _ in variants], 2)}), "
            f"{spread([v.cpu / b.cpu for b, v in variants], 2)} of its CPU; "
            f"job / engine by the clock "
            f"{spread([r[0] / v.rate for r, (_, v) in zip(rows, variants, strict=True)], 2)}"
        )
    print()
    print("where a session's time goes, the job run in this process (ms per session, low–high):")
    parts = [
        ("engine: analyze and render", lambda b: b.engine),
        ("the new head's fault counts", lambda b: b.counts),
        ("blob I/O: read the base", lambda b: b.blob_read),
        ("blob I/O: hash and store the repair", lambda b: b.blob_write),
        ("database round trips", lambda b: b.database),
    ]
    for label, part in parts:
        print(f"  {label + ':':<38} {spread([b.per_session(part(b)) for b in breakdowns], 2)}")
    rest = [
        b.per_session(b.wall - b.engine - b.counts - b.blob_read - b.blob_write - b.database)
        for b in breakdowns
    ]
    print(f"  {'the rest (ORM, Python, audit rows):':<38} {spread(rest, 2)}")
    if any(b.behind_read or b.behind_write for b in breakdowns):
        print(
            f"  {'blob threads, overlapped: read, store:':<38} "
            f"{spread([b.per_session(b.behind_read) for b in breakdowns], 2)}, "
            f"{spread([b.per_session(b.behind_write) for b in breakdowns], 2)} "
            "(not in the clock above: the job's thread waits only for what is not done yet)"
        )
    print(f"  {'all, by the clock:':<38} {spread([b.per_session(b.wall) for b in breakdowns], 2)}")
    cpus = [b.per_session(b.cpu) for b in breakdowns]
    print(f"  {'all, CPU of this process:':<38} {spread(cpus, 2)}")
    print(
        f"  database round trips per session:      "
        f"{spread([b.queries / b.sessions for b in breakdowns], 1)}; their share of the clock: "
        f"{spread([b.database / b.wall * 100 for b in breakdowns], 0)} %"
    )
    if s3 is not None:
        kinds = sorted({kind for b in breakdowns for kind in b.requests})
        by_kind = ", ".join(
            f"{kind} {spread([b.requests[kind] / b.sessions for b in breakdowns], 2)}"
            for kind in kinds
        )
        print(
            f"  S3 requests per session:               {by_kind or 'none'}; "
            f"connections boto3 opened per session: "
            f"{spread([b.connections / b.sessions for b in breakdowns], 2)} "
            f"(server: {args.s3_server})"
        )


if __name__ == "__main__":
    main()
