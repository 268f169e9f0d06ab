"""What the benchmarks of bench/ that serve Pairfix share: sessions, a stack, peak RSS.

Sessions come from tools/gen_sessions.py and are kept under var/workloads/ once
made, named by what makes them (records, seed, fault rate, result sizes).
`Stack` is Pairfix as deployed, on 127.0.0.1: a database of the benchmark's
own, gunicorn, a Celery worker, blobs and broker under a folder of its own.
Peak RSS is read from /proc (Linux): a process's VmHWM is its own high-water
mark, not that of its children, which a server with worker processes needs.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "var" / "workloads"
BIN = Path(sys.executable).parent


def claude_code(
    records: int, seed: int = 1, fault_rate: float = 0.01, result_bytes: str = "100:50000"
) -> Path:
    """Return a generated Claude Code session of exactly `records` records, making it once.

    Result sizes are log-uniform over `result_bytes` (MIN:MAX bytes); the
    default makes about 5.3 KB a record (50,000 records: about 270 MB).
    """
    out = WORKLOADS / f"cc-r{records}-s{seed}-f{fault_rate}-b{result_bytes}.jsonl"
    if not out.exists():
        WORKLOADS.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=WORKLOADS))
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "tools" / "gen_sessions.py"),
                "--format",
                "claude_code",
                "--records",
                str(records),
                "--seed",
                str(seed),
                "--fault-rate",
                str(fault_rate),
                "--result-bytes",
                result_bytes,
                "--out",
                str(building / out.name),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (building / out.name).rename(out)
        for leftover in building.iterdir():
            leftover.unlink()
        building.rmdir()
    return out


def peak_rss_mb(pid: int) -> float:
    """Return the peak resident set size of live process `pid` so far, in MB (VmHWM, 10^6 B)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmHWM for process {pid}")


def children(pid: int) -> list[int]:
    """Return the ids of the live child processes of `pid` (Linux /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


# Run by a small Python of its own: a child forked from this (large) process would count
# this process's pages in its peak until it execs.
LAUNCHER = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run `argv` to its end; return (wall seconds, peak RSS in MB, stdout).

    The peak comes with the exit status (wait4), so it is the whole life of
    that process. Raises SystemExit with its error output when it fails.
    """
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        start = time.perf_counter()
        code = subprocess.call(
            [sys.executable, "-c", LAUNCHER, peak.name, *argv],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
        )
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if code:
            raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.read().decode()[-3000:]}")
        return wall, int(peak.read()) * 1024 / 1e6, out.read().decode()


def free_port(low: int, high: int) -> int:
    """Return a port in [low, high] that 127.0.0.1 can bind now."""
    for port in range(low, high + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit(f"no free port in {low}-{high}")


def production_env(database_url: str, var: Path, broker_url: str | None) -> dict[str, str]:
    """Return the environment of a server, worker or command run as in production.

    DEBUG off (no query log), plain HTTP on 127.0.0.1 (no https redirect, no
    secure-only cookies), blobs, uploads and static files under `var`; the
    broker is `broker_url`, or kombu's filesystem transport under `var`.
    """
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "VAR_DIR": str(var),
        "MEDIA_ROOT": str(var / "media"),
        "STATIC_ROOT": str(var / "static"),
        "FILE_UPLOAD_TEMP_DIR": str(var / "tmp"),
        "DEBUG": "False",
        "SECRET_KEY": os.getenv("SECRET_KEY") or secrets.token_urlsafe(50),
        "SECURE_SSL_REDIRECT": "False",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    else:
        env.pop("CELERY_BROKER_URL", None)
        env["BROKER_DIR"] = str(var / "broker")
    return env


def wait_until(ready: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll `ready` every 0.2 s until it is true; SystemExit after `seconds`."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {seconds:.0f} s")
        time.sleep(0.2)


def healthy(base: str) -> bool:
    """Return whether the server at `base` answers /healthz with 200."""
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as response:
            return int(response.status) == 200
    except OSError:
        return False


class Database:
    """A database of a benchmark's own: a SQLite file under a folder, or one on the PostgreSQL
    server of `server_url` named `<configured name>_<suffix>`, made empty and dropped by `drop`.
    """

    def __init__(self, server_url: str | None, suffix: str, folder: Path) -> None:
        self.server: dict[str, object] | None = None
        if not server_url:
            self.url = f"sqlite:///{folder / 'bench.sqlite3'}"
            return
        import dj_database_url

        db = dj_database_url.parse(server_url)
        if db["ENGINE"] != "django.db.backends.postgresql":
            raise SystemExit("DATABASE_URL: only PostgreSQL (or nothing, for SQLite) is supported")
        self.name = f"{db['NAME']}_{suffix}"
        self.server = {
            "host": db["HOST"] or None,
            "port": db["PORT"] or None,
            "user": db["USER"] or None,
            "password": db["PASSWORD"] or None,
            "dbname": "postgres",
        }
        password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
        host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
        self.url = f"postgres://{db['USER']}{password}@{host}:{port}/{self.name}"
        self.drop()
        self._sql(f"CREATE DATABASE {self.name}")

    @property
    def engine(self) -> str:
        return "PostgreSQL" if self.server else "SQLite"

    def drop(self) -> None:
        if self.server:
            self._sql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")

    def _sql(self, statement: str) -> None:
        import psycopg

        assert self.server is not None
        with psycopg.connect(**self.server, autocommit=True) as connection:  # type: ignore[arg-type]
            connection.execute(statement)


class Stack:
    """Pairfix served as in production on 127.0.0.1, with a database and a folder of its own.

    On PostgreSQL when DATABASE_URL says so (a database `<name>_<suffix>` on
    that server, dropped by `close`), else a SQLite file; Redis when
    CELERY_BROKER_URL says so (a queue of its own), else kombu's filesystem
    transport. This process is set up as a Django client of the same database
    (for users, tokens and reading results); its own memory is not measured.
    """

    USERNAME = "alice"
    PASSWORD = "bench-password-alice"

    def __init__(self, suffix: str, ports: tuple[int, int]) -> None:
        self.ports = ports
        (ROOT / "var").mkdir(exist_ok=True)
        self.var = Path(tempfile.mkdtemp(prefix=f"bench-{suffix}-", dir=ROOT / "var"))
        self.database = Database(os.getenv("DATABASE_URL"), suffix, self.var)
        self.broker = os.getenv("CELERY_BROKER_URL")
        self.env = production_env(self.database.url, self.var, self.broker)
        self.env["CELERY_TASK_DEFAULT_QUEUE"] = f"pairfix-{suffix}"
        self.web: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.base = ""
        os.environ.update(self.env)
        try:
            self._set_up()
        except BaseException:
            self.database.drop()
            shutil.rmtree(self.var, ignore_errors=True)
            raise

    def _set_up(self) -> None:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from transcripts import actions

        call_command("migrate", verbosity=0)
        call_command("collectstatic", verbosity=0, interactive=False)
        self.user = get_user_model().objects.create_user(self.USERNAME, password=self.PASSWORD)
        self.workspace = actions.do_create_workspace("bench", acting_user=self.user)
        _, self.token = actions.do_create_api_token(self.workspace, "bench", acting_user=self.user)

    def describe(self) -> str:
        broker = "Redis" if self.broker else "filesystem broker"
        return f"{self.database.engine}, {broker}, {os.cpu_count()} CPUs"

    def start_web(self, threads: int = 4) -> None:
        """Start gunicorn (one worker process, `threads` threads) and wait for /healthz."""
        port = free_port(*self.ports)
        self.base = f"http://127.0.0.1:{port}"
        self.web = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "project.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                "--threads",
                str(threads),
                "--worker-class",
                "gthread",
                # A gigabyte upload takes longer than gunicorn's default 30 s.
                "--timeout",
                "1800",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=(self.var / "gunicorn.log").open("wb"),
        )
        wait_until(lambda: self._alive(self.web) and healthy(self.base), 60, "gunicorn starting")

    def start_worker(self) -> None:
        """Start one `celery worker` process (solo pool) on the stack's queue."""
        self.worker = subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "project",
                "worker",
                "-Q",
                self.env["CELERY_TASK_DEFAULT_QUEUE"],
                "-n",
                f"bench-{os.getpid()}@%h",
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
            stdout=subprocess.DEVNULL,
            stderr=(self.var / "worker.log").open("wb"),
        )
        # Ready once its CPU time stops growing (imports done, connected to the broker).
        last = -1.0
        deadline = time.monotonic() + 60
        while True:
            self._alive(self.worker)
            now = cpu_seconds(self.worker.pid)
            if now == last:
                return
            if time.monotonic() > deadline:
                raise SystemExit("the Celery worker did not settle")
            last = now
            time.sleep(0.5)

    def web_pids(self) -> list[int]:
        """Return the gunicorn worker processes (the master only forks and watches them)."""
        assert self.web is not None
        return children(self.web.pid)

    def web_rss(self) -> tuple[float, float]:
        """Return (resident now, peak so far) of gunicorn's worker process, in MB."""
        [pid] = self.web_pids()
        return rss_mb(pid), peak_rss_mb(pid)

    def worker_rss(self) -> tuple[float, float]:
        """Return (resident now, peak so far) of the Celery worker process, in MB."""
        assert self.worker is not None
        self._alive(self.worker)
        return rss_mb(self.worker.pid), peak_rss_mb(self.worker.pid)

    def stop(self) -> None:
        """Stop the web server and the worker (the ones this stack started)."""
        for process in (self.web, self.worker):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in (self.web, self.worker):
            if process is not None:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.web = self.worker = None

    def close(self) -> None:
        """Stop the processes, drop the database and delete the folder."""
        self.stop()
        from django.db import connections

        connections.close_all()
        if self.broker:
            from project.celery import app

            with app.connection_for_write() as broker:
                broker.default_channel.queue_purge(self.env["CELERY_TASK_DEFAULT_QUEUE"])
        self.database.drop()
        shutil.rmtree(self.var, ignore_errors=True)

    def _alive(self, process: subprocess.Popen[bytes] | None) -> bool:
        assert process is not None
        if process.poll() is not None:
            log = "gunicorn.log" if process is self.web else "worker.log"
            tail = (self.var / log).read_text(errors="replace")[-3000:]
            raise SystemExit(f"{log.split('.')[0]} exited ({process.returncode}):\n{tail}")
        return True


def rss_mb(pid: int) -> float:
    """Return the resident set size of live process `pid` now, in MB (VmRSS, 10^6 B)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU seconds process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def multipart(fields: dict[str, str], field: str, path: Path) -> tuple[str, int, Any]:
    """Return (content type, length, body chunks) of a multipart form with the file at `path`.

    The file is read a MiB at a time while the body is sent, never whole.
    """
    boundary = secrets.token_hex(16)
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
        f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def chunks() -> Any:
        yield head
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                yield chunk
        yield tail

    length = len(head) + path.stat().st_size + len(tail)
    return f"multipart/form-data; boundary={boundary}", length, chunks()


def api_upload(base: str, token: str, path: Path) -> dict[str, Any]:
    """Upload the session at `path` through POST /api/sessions, streamed; return the session."""
    import http.client
    import json
    from urllib.parse import urlsplit

    where = urlsplit(base)
    content_type, length, body = multipart({"name": path.name}, "file", path)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=1800)
    try:
        connection.request(
            "POST",
            "/api/sessions",
            body=body,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": content_type,
                "Content-Length": str(length),
            },
        )
        response = connection.getresponse()
        answer = response.read()
    finally:
        connection.close()
    if response.status != 201:
        raise SystemExit(f"POST /api/sessions answered {response.status}: {answer[:2000]!r}")
    session: dict[str, Any] = json.loads(answer)
    return session
