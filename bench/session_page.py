"""Benchmark: the session page's first response for a long session against a short one.

Generates two Claude Code sessions with tools/gen_sessions.py (kept under
var/workloads), 500 and 50,000 records by default, stores them and builds
their timelines the way the Celery task does (timed), then times the requests
the page makes, through the whole Django stack (the test client, logged in):
the first response, the next window, a jump to a record, the next fault and a
block expanded. It counts the requests that parsed a whole file (there should
be none) and prints the ratio of the long session's first response to the
short one's, which the issue wants at most 1.5.

With --list-sessions N it also fills the database with N sessions (rows only,
no files) and times the session list and the overview pages.

    .venv/bin/python bench/session_page.py [--small 500] [--large 50000] [--list-sessions 100000]

It never touches the configured database: it uses a temporary SQLite file, or
with DATABASE_URL a database `pairfix_bench_page` on that PostgreSQL server, dropped
at the end; blobs and collected static files go to temporary folders. DEBUG is
False, as in production.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LIMIT = 1.5
BENCH_DATABASE = "pairfix_bench_page"  # not the job benchmark's, which may be running


def bench_database_url(server_url: str | None) -> tuple[str, Callable[[], None]]:
    """Return the DATABASE_URL of a fresh database for this benchmark, and how to drop it.

    A temporary SQLite file, or with `server_url` (PostgreSQL) the database
    BENCH_DATABASE on that server, created empty.
    """
    if not server_url:
        folder = tempfile.mkdtemp(prefix="pairfix-bench-page-")
        return f"sqlite:///{folder}/bench.sqlite3", lambda: shutil.rmtree(folder)
    import dj_database_url
    import psycopg

    db = dj_database_url.parse(server_url)
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("DATABASE_URL: only PostgreSQL (or nothing, for SQLite) is supported")
    server = {
        "host": db["HOST"] or None,
        "port": db["PORT"] or None,
        "user": db["USER"] or None,
        "password": db["PASSWORD"] or None,
        "dbname": "postgres",
    }

    def sql(statement: str) -> None:
        with psycopg.connect(**server, autocommit=True) as connection:
            connection.execute(statement)

    sql(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)")
    sql(f"CREATE DATABASE {BENCH_DATABASE}")
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    url = f"postgres://{db['USER']}{password}@{host}:{port}/{BENCH_DATABASE}"
    return url, lambda: sql(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)")


def workload(records: int, fault_rate: float, result_bytes: str) -> Path:
    """Return a generated Claude Code session of `records` records, making it once."""
    out = ROOT / "var" / "workloads" / f"page-r{records}-f{fault_rate}-b{result_bytes}.jsonl"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=out.parent))
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "tools" / "gen_sessions.py"),
                "--format",
                "claude_code",
                "--records",
                str(records),
                "--seed",
                "3",
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
        shutil.rmtree(building)
    return out


def timed(runs: int, request: Callable[[], object]) -> tuple[float, float]:
    """Return the median and the slowest of `runs` calls of `request`, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        request()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--fault-rate", type=float, default=0.05)
    parser.add_argument("--result-bytes", default="100:5000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--list-sessions", type=int, default=0)
    args = parser.parse_args()

    files = {n: workload(n, args.fault_rate, args.result_bytes) for n in (args.small, args.large)}
    server_url = os.getenv("DATABASE_URL")
    url, drop = bench_database_url(server_url)
    media = tempfile.mkdtemp(prefix="pairfix-bench-media-")
    static = tempfile.mkdtemp(prefix="pairfix-bench-static-")
    os.environ.update(
        {
            "DATABASE_URL": url,
            "MEDIA_ROOT": media,
            "STATIC_ROOT": static,
            "DEBUG": "False",
            "SECRET_KEY": os.getenv("SECRET_KEY") or secrets.token_urlsafe(50),
            # The test client speaks plain HTTP: no redirect to https, cookies sent over it.
            "SECURE_SSL_REDIRECT": "False",
            "SESSION_COOKIE_SECURE": "False",
            "CSRF_COOKIE_SECURE": "False",
            "ALLOWED_HOSTS": "testserver",
            "LOG_LEVEL": "ERROR",
        }
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    try:
        call_command("migrate", verbosity=0)
        call_command("collectstatic", verbosity=0, interactive=False)
        run(args, files, settings, get_user_model(), Client)
    finally:
        connections.close_all()
        drop()
        shutil.rmtree(media)
        shutil.rmtree(static)


def run(args: argparse.Namespace, files: dict[int, Path], settings, User, Client) -> None:  # type: ignore[no-untyped-def]
    from transcripts import actions, formats
    from transcripts.models import TimelineRow

    user = User.objects.create_user("bench")
    workspace = actions.do_create_workspace("bench", acting_user=user)
    client = Client()
    client.force_login(user)
    settings.TIMELINE_INLINE_BYTES = 0  # every timeline built as the task builds it
    print(
        f"Claude Code sessions of {args.small} and {args.large} records "
        f"({files[args.small].stat().st_size / 1e6:.1f} MB and "
        f"{files[args.large].stat().st_size / 1e6:.1f} MB); {os.cpu_count()} CPUs; "
        f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}; "
        f"median of {args.runs} requests each",
        flush=True,
    )
    sessions = {}
    for records, path in files.items():
        start = time.perf_counter()
        session = actions.do_ingest_session(
            workspace, path.name, path.read_bytes(), acting_user=user
        )
        ingested = time.perf_counter() - start
        built = actions.timeline_for(session, "synthesize")
        start = time.perf_counter()
        assert actions.do_build_timeline(built.pk)
        build = time.perf_counter() - start
        built.refresh_from_db()
        rows = TimelineRow.objects.filter(timeline=built)
        faulty = list(rows.filter(faulty=True).values_list("position", flat=True)[:1])
        if not faulty:
            raise SystemExit(f"the {records}-record session has no fault: try another --fault-rate")
        print(
            f"{records:>7} records: ingested in {ingested:.2f} s, timeline built in {build:.2f} s "
            f"({rows.count()} rows, {built.fault_total} faults)",
            flush=True,
        )
        sessions[records] = (session, faulty)

    parsed = []
    load = formats.load

    def counting_load(*a, **k):  # type: ignore[no-untyped-def]
        parsed.append(a[1])
        return load(*a, **k)

    formats.load = counting_load
    results: dict[str, dict[int, tuple[float, float]]] = {}

    def page(path: str, needle: str) -> Callable[[], object]:
        def get() -> object:
            response = client.get(path)
            assert response.status_code == 200 and needle in response.content.decode(), path
            return response

        return get

    for records, (session, faulty) in sessions.items():
        base = session.get_absolute_url()
        rows = f"/sessions/{session.pk}/rows/?policy=synthesize"
        middle = records // 2
        checks = {
            "first response (the page)": page(base, 'id="r-0"'),
            "next window (scrolling)": page(f"{rows}&after=99", 'data-pos="100"'),
            "jump to the middle record": page(f"{rows}&record={middle}", f'id="r-{middle}"'),
            "next fault": page(f"{rows}&fault_after={faulty[0] - 1}", "has-fault"),
            "a record in full": page(f"/sessions/{session.pk}/records/3/", "Record #3"),
        }
        page(base, 'id="r-0"')()  # warm-up: templates, connections
        for label, request in checks.items():
            results.setdefault(label, {})[records] = timed(args.runs, request)
    formats.load = load

    small, large = args.small, args.large
    print()
    print(f"{'':32} {small:>7} records {large:>7} records   ratio   (median ms, slowest ms)")
    for label, by_size in results.items():
        (a, a_max), (b, b_max) = by_size[small], by_size[large]
        print(f"{label:32} {a:7.1f} ({a_max:5.0f}) {b:7.1f} ({b_max:5.0f})   {b / a:5.2f}")
    first = results["first response (the page)"]
    ratio = first[large][0] / first[small][0]
    print()
    requests = len(results) * 2 * (args.runs + 1) + 2
    print(f"whole files parsed during the {requests} requests: {len(parsed)}")
    verdict = "ok" if ratio <= LIMIT and not parsed else "TOO SLOW"
    print(f"first response, {large} / {small} records: {ratio:.2f} (at most {LIMIT}): {verdict}")
    if args.list_sessions:
        list_and_overview(args.list_sessions, workspace, client, args.runs)
    if verdict != "ok":
        raise SystemExit(1)


def list_and_overview(count: int, workspace, client, runs: int) -> None:  # type: ignore[no-untyped-def]
    """Fill the database with `count` sessions (rows only) and time the list and the overview."""
    from django.core.cache import cache
    from django.db import connection
    from django.utils import timezone

    from transcripts.core.model import FaultKind
    from transcripts.models import Revision, Session

    rng = random.Random(7)
    kinds = [str(kind) for kind in FaultKind][:6]
    formats = ["claude_code", "codex", "openclaw", "openai_chat", "anthropic", "gemini"]
    start = time.perf_counter()
    batch = []
    for n in range(count):
        counts = {}
        if rng.random() < 0.4:
            counts = {k: rng.randint(1, 9) for k in rng.sample(kinds, rng.randint(1, 3))}
        batch.append(
            Session(
                workspace=workspace,
                name=f"{rng.getrandbits(64):016x}-{n}.jsonl",
                format=rng.choice(formats),
                record_count=rng.randint(10, 5000),
                fault_counts=counts,
            )
        )
    Session.objects.bulk_create(batch, batch_size=2000)
    revisions = [
        Revision(session_id=pk, number=0, sha256="0" * 64, size=1, engine_version="1")
        for pk in Session.objects.filter(head=None).values_list("pk", flat=True)
    ]
    Revision.objects.bulk_create(revisions, batch_size=2000)
    table, revision_table = Session._meta.db_table, Revision._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET head_id = (SELECT r.id FROM {revision_table} r "
            f"WHERE r.session_id = {table}.id) WHERE head_id IS NULL"
        )
    # Stored over the last 90 days, so that the chart and the date filters have work.
    now = timezone.now()
    for days in range(90):
        Session.objects.filter(pk__in=[p for p in range(days, count, 90)]).update(
            created=now - timezone.timedelta(days=days)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # what autovacuum (PostgreSQL) would do soon anyway
    print(f"\n{count} more sessions stored in {time.perf_counter() - start:.0f} s")

    def get(path: str) -> Callable[[], object]:
        def request() -> object:
            response = client.get(path)
            assert response.status_code == 200, path
            return response

        return request

    def cold_overview() -> object:
        cache.clear()
        return get("/overview/")()

    checks = {
        "session list, first page": get("/"),
        "session list, page 500": get("/?page=500"),
        "filtered by fault kind": get("/?fault=missing_result"),
        "filtered by format and repaired": get("/?format=codex&repaired=no"),
        "text search": get("/?q=abc"),
        "sorted by name, page 200": get("/?sort=name&page=200"),
        "overview (figures computed)": cold_overview,
        "overview (figures cached)": get("/overview/"),
    }
    print(f"{'':40} {'median ms':>10} {'slowest ms':>11}")
    for label, request in checks.items():
        request()
        median, slowest = timed(runs, request)
        print(f"{label:40} {median:10.1f} {slowest:11.1f}")


if __name__ == "__main__":
    main()
