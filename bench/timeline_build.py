"""Benchmark: the peak memory of building a large session's timeline, in a fresh process.

One generated Claude Code session (tools/gen_sessions.py; 50,000 records,
about 264 MB, by default) is stored by `manage.py ingest`; then a process
of its own does what the worker's build task does when the session's page
is first opened: it builds the head's timeline under the default policy
(`actions.do_build_timeline`: analysis, rows, search index, counts). It
prints that process's peak RSS (VmHWM) once Django is set up and the
session read (idle), and at the end of the build, with the build's time,
the rows stored and the bytes of the session per MB of peak growth.

    .venv/bin/python bench/timeline_build.py [--records 190000]

On PostgreSQL with DATABASE_URL (a database `<name>_timeline`, dropped at
the end), else a SQLite file; blobs under a folder of var/ deleted at the
end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py)


def build(session_id: int) -> None:
    """Build session `session_id`'s default timeline here; print idle and peak RSS, seconds."""
    import django

    django.setup()
    from transcripts.actions import timelines
    from transcripts.engine import DEFAULT_POLICY
    from transcripts.models import Session

    session = Session.objects.select_related("head").get(pk=session_id)
    timeline, _ = timelines._get_or_create(session, DEFAULT_POLICY, "")
    idle = harness.peak_rss_mb(os.getpid())
    start = time.perf_counter()
    assert timelines.do_build_timeline(timeline.pk), "the timeline was this call's to build"
    seconds = time.perf_counter() - start
    timeline.refresh_from_db()
    assert timeline.status == timeline.Status.READY, timeline.error
    print(idle, harness.peak_rss_mb(os.getpid()), seconds, timeline.row_count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help="default: about 264 MB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--build", type=int, metavar="SESSION", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        build(args.build)
        return

    path = harness.claude_code(args.records, seed=args.seed)
    size = path.stat().st_size
    stack = harness.Stack("timeline", (0, 0))
    from transcripts.models import Session

    try:
        print(
            f"Claude Code session: {args.records:,} records, {size / 1e6:,.0f} MB; "
            f"{stack.describe()}"
        )
        seconds, peak, _ = harness.run_measured(
            [sys.executable, "manage.py", "ingest", str(path), "--workspace", stack.workspace.name],
            stack.env,
        )
        print(f"manage.py ingest: {seconds:.1f} s, peak RSS {peak:.0f} MB")
        session = Session.objects.get(workspace=stack.workspace)
        seconds, peak, out = harness.run_measured(
            [sys.executable, str(Path(__file__).resolve()), "--build", str(session.pk)], stack.env
        )
        idle, built_peak, build_seconds, rows = out.split()
        print(
            f"timeline build (a process of its own): {float(build_seconds):.1f} s "
            f"({seconds:.1f} s with start-up), {int(rows):,} rows stored"
        )
        print(
            f"  peak RSS: {float(idle):.0f} MB idle, {float(built_peak):.0f} MB built "
            f"({peak:.0f} MB over the process's life): "
            f"{float(built_peak) - float(idle):.0f} MB for the build, "
            f"{(float(built_peak) - float(idle)) * 1e3 / int(rows):.2f} KB a row"
        )
    finally:
        stack.close()


if __name__ == "__main__":
    main()
