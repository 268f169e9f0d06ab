"""Benchmark: a 1.0 GB session through the API, through `ingest`, then repaired by a job.

One generated Claude Code session (tools/gen_sessions.py, about 1.0 GB with
the default --records) goes, as in production, through:

1. `POST /api/sessions` of gunicorn (DEBUG off, one worker process) on
   127.0.0.1, with an API token, the multipart body streamed a MiB at a time;
2. `manage.py ingest FILE` in a process of its own;
3. a repair job over both sessions (each a revision of its own, one blob),
   run by one `celery worker` process (solo pool).

It prints each step's time and the peak RSS (VmHWM) of gunicorn's worker
process, of `ingest` and of the Celery worker, next to what each held idle
before; for the job also the worker's peak once the first session is done
(a worker must not grow with the number of sessions) and what it still
holds at the end. It ends with the issue's figure to reach (worker and web
peak RSS at most 150 MB each; `ingest` is held to the same), met or NOT
met. With
--profile it then repairs the session once more in this process under
tracemalloc and prints where the memory at the end of the analysis is held,
by line.

    .venv/bin/python bench/ingest_job.py [--records 190000] [--profile]

On PostgreSQL with DATABASE_URL (a database `<name>_ingest`, dropped at the
end) and Redis with CELERY_BROKER_URL, else a SQLite file and the filesystem
broker; blobs and uploads under a folder of var/ deleted at the end. Ports
9650-9699 by default (--ports LOW-HIGH).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py)

TARGET_MB = 150


def profile(session_id: int, top: int = 12) -> None:
    """Repair session `session_id`'s head here under tracemalloc; print the largest holders."""
    from transcripts.actions import open_analysis, store_repaired
    from transcripts.models import Session

    head = Session.objects.select_related("head").get(pk=session_id).head
    assert head is not None
    tracemalloc.start(1)
    with open_analysis(head, "synthesize") as analysis:
        held = tracemalloc.take_snapshot()
        store_repaired(analysis)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    total = sum(stat.size for stat in held.statistics("filename"))
    print(
        f"\nProfile (tracemalloc, this process): {total / 1e6:.1f} MB of Python objects held "
        f"once the analysis is made, {peak / 1e6:.1f} MB at the peak; by line:"
    )
    for stat in held.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        where = Path(frame.filename)
        if harness.ROOT in where.parents:
            where = where.relative_to(harness.ROOT)
        print(f"  {stat.size / 1e6:7.1f} MB {stat.count:>9,} blocks  {where}:{frame.lineno}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=190_000, help="default: about 1.0 GB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ports", default="9650-9699")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    low, high = (int(p) for p in args.ports.split("-"))

    path = harness.claude_code(args.records, seed=args.seed)
    size = path.stat().st_size
    stack = harness.Stack("ingest", (low, high))
    from transcripts import actions
    from transcripts.models import Job, Session

    figures: list[tuple[str, float]] = []
    try:
        print(
            f"Claude Code session: {args.records:,} records, {size / 1e6:,.0f} MB; "
            f"{stack.describe()}"
        )
        stack.start_web()
        stack.start_worker()
        web_idle, _ = stack.web_rss()
        worker_idle, _ = stack.worker_rss()
        print(f"\n{'step':44} {'s':>7} {'idle MB':>8} {'peak RSS MB':>12}")

        start = time.perf_counter()
        uploaded = harness.api_upload(stack.base, stack.token, path)
        seconds = time.perf_counter() - start
        _, web_peak = stack.web_rss()
        figures.append(("web (gunicorn worker), API upload", web_peak))
        print(
            f"{'POST /api/sessions (gunicorn worker)':44} {seconds:7.1f} {web_idle:8.0f} "
            f"{web_peak:12.0f}"
        )

        seconds, ingest_peak, _ = harness.run_measured(
            [
                sys.executable,
                "manage.py",
                "ingest",
                str(path),
                "--workspace",
                stack.workspace.name,
                "--user",
                stack.USERNAME,
            ],
            stack.env,
        )
        figures.append(("manage.py ingest", ingest_peak))
        print(
            f"{'manage.py ingest (its own process)':44} {seconds:7.1f} {'':>8} {ingest_peak:12.0f}"
        )

        sessions = Session.objects.filter(workspace=stack.workspace)
        assert sessions.count() == 2, "both ways in stored a session"
        # A large upload is stored unread; the worker's count_session task reads it.
        deadline = time.monotonic() + 1800
        while sessions.filter(analysed=False).exists():
            if time.monotonic() > deadline:
                raise SystemExit("the upload was not counted within 30 minutes")
            stack.worker_rss()  # fails if the worker died
            time.sleep(0.5)
        seconds = time.perf_counter() - start
        _, counted_peak = stack.worker_rss()
        figures.append(("Celery worker, counting the upload", counted_peak))
        print(
            f"{'upload counted, since it began (Celery worker)':44} {seconds:7.1f} "
            f"{worker_idle:8.0f} {counted_peak:12.0f}"
        )
        for session in sessions.select_related("head"):
            assert session.head is not None and session.head.size == size, session
            assert session.record_count == args.records, (session.record_count, args.records)
        job = actions.do_start_job(
            stack.workspace, sessions, policy="synthesize", acting_user=stack.user
        )
        start = time.perf_counter()
        deadline = time.monotonic() + 3600
        first: tuple[float, float, float] | None = None  # seconds, resident, peak
        while job.status != Job.Status.DONE:
            if time.monotonic() > deadline:
                raise SystemExit("the job did not finish within an hour")
            resident, peak = stack.worker_rss()  # fails if the worker died
            if first is None and job.processed >= 1:
                # Read within a poll of the first session's end: the second has only begun.
                first = (time.perf_counter() - start, resident, peak)
            time.sleep(0.5)
            job.refresh_from_db()
        seconds = time.perf_counter() - start
        worker_after, worker_peak = stack.worker_rss()
        figures.append(("Celery worker, repair job", worker_peak))
        if first is not None:
            print(
                f"{'repair job, 1st session (Celery worker)':44} {first[0]:7.1f} "
                f"{worker_idle:8.0f} {first[2]:12.0f}  (resident then {first[1]:.0f} MB)"
            )
        print(
            f"{'repair job, 2 sessions (Celery worker)':44} {seconds:7.1f} {worker_idle:8.0f} "
            f"{worker_peak:12.0f}  (resident after {worker_after:.0f} MB)"
        )
        if (job.done, job.failed) != (job.total, 0):
            raise SystemExit(f"the job failed: {job.done} of {job.total} done, {job.failed} failed")
        repaired = [s for s in sessions.select_related("head") if s.head and s.head.number == 1]
        print(
            f"\n{len(repaired)} of 2 sessions repaired (revision 1); session {uploaded['id']} "
            f"came through the API"
        )
        stack.stop()
        if args.profile:
            profile(int(uploaded["id"]))
    finally:
        stack.close()

    print(f"\nFigures to reach (issue 15), {size / 1e9:.2f} GB session: peak RSS, MB")
    for name, measured in figures:
        verdict = "met" if measured <= TARGET_MB else "NOT met"
        print(
            f"  {name:38} {measured:7.0f} against at most {TARGET_MB}: "
            f"{measured / TARGET_MB:.2f}x the target, {verdict}"
        )


if __name__ == "__main__":
    main()
