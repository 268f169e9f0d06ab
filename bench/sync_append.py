"""Benchmark: a 1.0 GB session synced from a folder, appended to by the sync and by the API.

One generated Claude Code session (tools/gen_sessions.py, about 1.0 GB with
the default --records) is copied into a sync source's folder, then, each step
a process of its own:

1. `manage.py sync --source ID`: the new file, staged, analysed, stored;
2. 40 records appended to the file, `manage.py sync --source ID` again: an
   append by the sync (the head's blob and the new lines staged, only the
   delta stored);
3. `manage.py shell -c` calling `do_append_records` with 40 records onto
   the session (what `POST /api/sessions/{id}/records` runs), the session
   first made appendable (not synced) by a `manage.py ingest` of the file.

Each step prints its wall time, CPU time (user + system, from wait4) and
peak RSS (ru_maxrss), medians of --runs runs (each on a copy of its own),
and the load average before the first run. No figure is a target of an
issue; whole-file reads made each step hold the session several times over.

    .venv/bin/python bench/sync_append.py [--records 190000] [--runs 3]

On PostgreSQL with DATABASE_URL (a database `<name>_sync`, dropped at the end)
else a SQLite file; blobs and staged files under a folder of var/ deleted at
the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py)

# The step's own usage comes with its exit status (wait4): its whole life, its children's not.
LAUNCHER = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(os.waitstatus_to_exitcode(status))
"""

APPEND = """
from pathlib import Path
from transcripts.actions import sync
from transcripts.models import Session
session = Session.objects.get(pk={pk})
sync.do_append_records(session, Path({lines!r}).read_bytes(), acting_user=session.created_by)
"""


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run `argv`; return (wall seconds, CPU seconds, peak RSS in MB). SystemExit if it fails."""
    with tempfile.NamedTemporaryFile("r") as usage, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        code = subprocess.call(
            [sys.executable, "-c", LAUNCHER, usage.name, *argv],
            cwd=harness.ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        wall = time.perf_counter() - start
        if code:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.read().decode()[-3000:]}")
        peak, cpu = usage.read().split()
        return wall, float(cpu), int(peak) * 1024 / 1e6


def records(parent: str, start: int, count: int) -> bytes:
    """Return `count` compact Claude Code user lines, each the child of the one before."""
    import orjson

    out = []
    for n in range(start, start + count):
        uid = f"bench-{n}"
        message = {"role": "user", "content": f"step {n}"}
        out.append(
            orjson.dumps({"type": "user", "uuid": uid, "parentUuid": parent, "message": message})
            + b"\n"
        )
        parent = uid
    return b"".join(out)


def last_uuid(path: Path) -> str:
    import orjson

    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - (1 << 20)))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return str(orjson.loads(last)["uuid"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=190_000, help="default: about 1.0 GB")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    workload = harness.claude_code(args.records)
    size = workload.stat().st_size
    stack = harness.Stack("sync", (9160, 9179))
    from transcripts.actions import sync
    from transcripts.models import SyncedFile

    manage = [sys.executable, "manage.py"]
    steps: dict[str, list[tuple[float, float, float]]] = {}
    load = os.getloadavg()
    try:
        sync_roots = stack.var / "sync"
        stack.env["SYNC_ROOTS"] = str(sync_roots)
        os.environ["SYNC_ROOTS"] = str(sync_roots)
        from django.conf import settings

        settings.SYNC_ROOTS = [sync_roots.resolve()]
        for run in range(args.runs):
            folder = sync_roots / f"run-{run}"
            folder.mkdir(parents=True)
            path = folder / "session.jsonl"
            shutil.copyfile(workload, path)
            os.utime(path, (time.time() - 86_400,) * 2)  # not live
            sync.do_grant_folder(stack.workspace, str(folder), acting_user=None)
            source = sync.do_create_source(
                stack.workspace, str(folder), acting_user=stack.user, format="claude_code"
            )
            by_source = [*manage, "sync", "--source", str(source.pk), "--no-progress"]
            steps.setdefault("sync, new file", []).append(measured(by_source, stack.env))
            lines = records(last_uuid(path), 0, 40)
            with path.open("ab") as f:
                f.write(lines)
            os.utime(path, (time.time() - 86_000,) * 2)
            steps.setdefault("sync, 40 records appended", []).append(measured(by_source, stack.env))
            synced = SyncedFile.objects.get(source=source)
            assert synced.offset == path.stat().st_size, "the append was not taken"
            assert synced.session.revisions.count() == 2
            ingest = [*manage, "ingest", str(path), "--workspace", "bench"]
            steps.setdefault("ingest (the API append's session)", []).append(
                measured([*ingest, "--user", stack.USERNAME], stack.env)
            )
            uploaded = synced.session.workspace.sessions.filter(source__isnull=True).latest("pk")
            appended = folder / "appended.jsonl"
            appended.write_bytes(records(last_uuid(path), 1000, 40))
            shell = [*manage, "shell", "-c", APPEND.format(pk=uploaded.pk, lines=str(appended))]
            steps.setdefault("API append, 40 records", []).append(measured(shell, stack.env))
            path.unlink()
        print(
            f"{size / 1e9:.2f} GB Claude Code session ({args.records:,} records), "
            f"{stack.describe()}, medians of {args.runs} runs, load average "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start"
        )
        for what, runs in steps.items():
            wall, cpu, peak = (statistics.median(r[i] for r in runs) for i in range(3))
            print(
                f"  {what:34} {wall:6.2f} s (CPU {cpu:5.2f} s)  peak RSS {peak:7.1f} MB "
                f"({peak * 1e6 / size:.2f}× the file)"
            )
        print(f"  load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        stack.close()


if __name__ == "__main__":
    main()
