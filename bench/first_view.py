"""Benchmark: time to first view of a long Claude Code session, Pairfix against two viewers.

For sessions of --small and --large records (5,000 and 50,000: 27 and 264 MB,
tools/gen_sessions.py) it times, each from nothing to a page to look at:

- Pairfix as deployed (gunicorn on 127.0.0.1, one Celery worker, DEBUG off):
  the session uploaded through `POST /api/sessions` (streamed; a large one is
  stored unread, for the worker to count), then its page asked for
  until rows are in it: the first look (the file's first records, read by
  the request while the worker builds the timeline) or the built timeline's
  first window, whichever comes first. Asked again every 0.1 s (a browser's
  htmx asks every second) until the whole timeline shows, whose time is
  printed too. Peak RSS of the web and the worker process (VmHWM, both
  started fresh for each session), and when each build stage began;
- claude-code-log (PyPI, 1.7.0): `claude-code-log FILE -o OUT.html --no-cache`,
  which parses every line into models and renders the whole session to one
  HTML file;
- claude-code-transcripts (PyPI, 0.6): `claude-code-transcripts json FILE -o
  DIR`, which loads the session and writes an index and pages of HTML;

each CLI a fresh process, its wall time and peak RSS. It ends with the issue's
figures to reach: at --large records at least 50x faster than claude-code-log
and 8x faster than claude-code-transcripts, under 300 MB; at --small faster
than both; each met or NOT met. With --profile it then builds the --large
session's timeline once more in this process, as the worker does, under
cProfile, and prints the functions that took the most time; --skip-viewers
times Pairfix alone.

    .venv/bin/python bench/first_view.py [--small 5000] [--large 50000] [--runs 1] [--profile]

The two viewers are installed, at those versions, into virtualenvs of their
own under --tools (default ~/.cache/pairfix-bench), never into Pairfix's.
On PostgreSQL with DATABASE_URL (a database `<name>_first_view`, dropped at
the end) and Redis with CELERY_BROKER_URL, else SQLite and the filesystem
broker. Ports 9650-9699 by default (--ports LOW-HIGH).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py)

VIEWERS = {
    # name: (package pinned, argv after the script, given the session and an output folder)
    "claude-code-log": (
        "claude-code-log==1.7.0",
        lambda session, out: [str(session), "-o", str(out / "session.html"), "--no-cache"],
    ),
    "claude-code-transcripts": (
        "claude-code-transcripts==0.6",
        lambda session, out: ["json", str(session), "-o", str(out / "html")],
    ),
}
MEMORY_MB = 300
FASTER = {"claude-code-log": 50, "claude-code-transcripts": 8}


def viewer(tools: Path, name: str) -> Path:
    """Return the console script `name`, installed into a virtualenv of its own if missing."""
    script = tools / name / "bin" / name
    if not script.exists():
        package = VIEWERS[name][0]
        print(f"installing {package} into {tools / name} ...", flush=True)
        subprocess.run(["python3.11", "-m", "venv", str(tools / name)], check=True)
        subprocess.run(
            [str(tools / name / "bin" / "pip"), "install", "--quiet", package],
            check=True,
            capture_output=True,
        )
    return script


@dataclass
class Run:
    seconds: float
    peak_mb: float
    note: str = ""


def run_viewer(script: Path, name: str, session: Path) -> Run:
    out = Path(tempfile.mkdtemp(prefix="bench-first-view-"))
    try:
        seconds, peak, _ = harness.run_measured(
            [str(script), *VIEWERS[name][1](session, out)], dict(os.environ)
        )
        written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(out)
    return Run(seconds, peak, f"{written / 1e6:.0f} MB of HTML")


def first_view(stack: harness.Stack, session: Path, cookie: str) -> Run:
    """Upload `session`, ask for its page until rows show; time that, and the whole timeline."""
    from transcripts.models import Timeline

    stack.start_web()
    stack.start_worker()
    try:
        # A server in use has served pages before: its templates and views are loaded.
        with urllib.request.urlopen(
            urllib.request.Request(stack.base + "/", headers={"Cookie": cookie}), timeout=60
        ) as response:
            response.read()
        start = time.perf_counter()
        uploaded = harness.api_upload(stack.base, stack.token, session)
        uploaded_at = time.perf_counter() - start
        request = urllib.request.Request(
            f"{stack.base}/sessions/{uploaded['id']}/", headers={"Cookie": cookie}
        )
        stages: dict[str, float] = {}
        deadline = time.monotonic() + 900
        seconds = first_look = 0.0
        while True:
            with urllib.request.urlopen(request, timeout=300) as response:
                page = response.read().decode()
            if not seconds and '<tr id="r-' in page:
                # The first view: rows to look at, the first look or the built timeline's.
                seconds = time.perf_counter() - start
                first_look = seconds if "A first look" in page else 0.0
            if 'class="summary-line"' in page:
                break
            timeline = Timeline.objects.filter(revision__session_id=uploaded["id"]).first()
            if timeline is not None:
                stages.setdefault(f"{timeline.status} {timeline.stage}", time.perf_counter())
            if time.monotonic() > deadline:
                raise SystemExit("the timeline was not built within 15 minutes")
            time.sleep(0.1)
        built_at = time.perf_counter() - start
        if '<tr id="r-' not in page:
            raise SystemExit("the built timeline shows no rows")
        _, web_peak = stack.web_rss()
        _, worker_peak = stack.worker_rss()
    finally:
        stack.stop()
    steps = [f"upload {uploaded_at:.1f}"]
    if first_look:
        steps.append(f"first look {first_look:.1f}")
    for name, at in stages.items():
        steps.append(f"{name} from {at - start:.1f}")
    steps.append(f"whole timeline {built_at:.1f}")
    note = f"web {web_peak:.0f} MB, worker {worker_peak:.0f} MB; s: " + ", ".join(steps)
    return Run(seconds, max(web_peak, worker_peak), note)


def profile_build(session_id: int, top: int = 25) -> None:
    """Build session `session_id`'s timeline again here under cProfile; print where time goes."""
    from transcripts import actions
    from transcripts.models import Timeline, TimelineRow

    built = Timeline.objects.get(revision__session_id=session_id)
    TimelineRow.objects.filter(timeline=built).delete()
    Timeline.objects.filter(pk=built.pk).update(
        status=Timeline.Status.QUEUED, claim=None, claimed_at=None, stage=0
    )
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(actions.do_build_timeline, built.pk)
    seconds = time.perf_counter() - start
    print(f"\nProfile: the worker's build of session {session_id}'s timeline, {seconds:.1f} s here")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def median(runs: list[Run]) -> Run:
    return Run(
        statistics.median(r.seconds for r in runs),
        statistics.median(r.peak_mb for r in runs),
        runs[-1].note,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=5000)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--tools", type=Path, default=Path.home() / ".cache" / "pairfix-bench")
    parser.add_argument("--ports", default="9650-9699")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--skip-viewers", action="store_true")
    args = parser.parse_args()
    low, high = (int(p) for p in args.ports.split("-"))

    names = [] if args.skip_viewers else list(VIEWERS)
    scripts = {name: viewer(args.tools, name) for name in names}
    sessions = {n: harness.claude_code(n, seed=1) for n in (args.small, args.large)}
    stack = harness.Stack("first_view", (low, high))
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(stack.user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    results: dict[int, dict[str, Run]] = {}
    try:
        print(f"{stack.describe()}; medians of {args.runs} run(s)")
        for records, session in sessions.items():
            size = session.stat().st_size / 1e6
            print(f"\nClaude Code session, {records:,} records, {size:.0f} MB")
            print(f"  {'':24} {'s':>7} {'peak RSS MB':>12}")
            row: dict[str, Run] = {}
            row["Pairfix"] = median([first_view(stack, session, cookie) for _ in range(args.runs)])
            for name, script in scripts.items():
                row[name] = median([run_viewer(script, name, session) for _ in range(args.runs)])
            for name, run in row.items():
                print(f"  {name:24} {run.seconds:7.1f} {run.peak_mb:12.0f}  {run.note}")
            results[records] = row
        if args.profile:
            from transcripts.models import Session

            large = Session.objects.get(workspace=stack.workspace, record_count=args.large)
            profile_build(large.pk)
    finally:
        stack.close()

    print("\nFigures to reach (issue 15): time to first view")
    large, small = results[args.large], results[args.small]
    pairfix = large["Pairfix"]
    for name, times in FASTER.items():
        if name not in large:
            continue
        ratio = large[name].seconds / pairfix.seconds
        verdict = "met" if ratio >= times else "NOT met"
        print(
            f"  {args.large:,} records: {ratio:5.1f}x faster than {name} "
            f"({large[name].seconds:.1f} s against {pairfix.seconds:.1f} s), "
            f"target at least {times}x: {verdict}"
        )
    verdict = "met" if pairfix.peak_mb < MEMORY_MB else "NOT met"
    print(
        f"  {args.large:,} records: peak RSS {pairfix.peak_mb:.0f} MB (the larger of web and "
        f"worker), target under {MEMORY_MB} MB: {verdict}"
    )
    for name in FASTER:
        if name not in small:
            continue
        ratio = small[name].seconds / small["Pairfix"].seconds
        verdict = "met" if ratio > 1 else "NOT met"
        print(
            f"  {args.small:,} records: {ratio:5.2f}x as fast as {name} "
            f"({small[name].seconds:.1f} s against {small['Pairfix'].seconds:.1f} s), "
            f"target faster: {verdict}"
        )


if __name__ == "__main__":
    main()
