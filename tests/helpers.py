"""Helpers shared by the web, jobs and browser tests."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from transcripts import actions
from transcripts.models import Job

SAMPLES = Path(settings.BASE_DIR) / "demo" / "samples"
GENERATOR = Path(settings.BASE_DIR) / "tools" / "gen_sessions.py"


def _workloads() -> Path:
    """Return the folder that keeps the generator's sessions between test runs.

    Outside the checkout (`PAIRFIX_TEST_WORKLOADS`, else ~/.cache/pairfix-tests), so
    a clean clone on the same machine (CI) finds them made; one folder per version
    of the generator, so a changed generator makes its sessions anew.
    """
    root = os.getenv("PAIRFIX_TEST_WORKLOADS") or Path.home() / ".cache" / "pairfix-tests"
    version = hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:16]
    return Path(root) / f"workloads-{version}"


WORKLOADS = _workloads()
ORPHANED_CALL = "toolu_01CCCCCCCCCCCCCCCCCCCCCC"


def sample(name: str) -> bytes:
    """Return the bytes of a demo sample, e.g. "formats/claude_code.jsonl"."""
    return (SAMPLES / name).read_bytes()


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate the test database to `targets` ((app, migration) pairs); return their apps."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def wait_for_job(job: Job, timeout: float = 60) -> Job:
    """Return `job` re-read once it is done; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status == Job.Status.DONE:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job.pk} still {job.status} after {timeout}s")


def run_inline(job: Job) -> Job:
    """Do what the workers do for `job`, in this process; return it re-read.

    The same actions the tasks call: fan out, then each chunk in turn.
    """
    for item_ids in actions.do_fan_out_job(job.pk):
        assert actions.do_run_job_items(job.pk, item_ids) == []
    job.refresh_from_db()
    return job


def generated_sessions(count: int, *, seed: int, records: int = 30) -> list[Path]:
    """Return `count` small Claude Code session files from the shared generator, most faulty.

    Kept under var/workloads once made: the generator spends about 80 ms on
    each session however small, so two processes share the first run.
    """
    out = WORKLOADS / f"claude_code-r{records}-n{count}-s{seed}"
    if not out.exists():
        WORKLOADS.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=WORKLOADS))
        shares = [(seed, count - count // 2), (seed + 1, count // 2)]
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(GENERATOR),
                    "--format",
                    "claude_code",
                    "--records",
                    str(records),
                    "--sessions",
                    str(n),
                    "--fault-rate",
                    "0.5",
                    "--result-bytes",
                    "100:1000",
                    "--seed",
                    str(share_seed),
                    "--out-dir",
                    str(building / str(share_seed)),
                ],
                stdout=subprocess.DEVNULL,
            )
            for share_seed, n in shares
        ]
        assert [p.wait() for p in processes] == [0, 0]
        _keep(building, out)
    paths = sorted(out.glob("*/*.jsonl"))
    assert len(paths) == count
    return paths


def _keep(building: Path, out: Path) -> None:
    """Move a made workload into place; another process's copy, made first, stays."""
    try:
        building.rename(out)
    except OSError:
        if not out.exists():
            raise
        shutil.rmtree(building, ignore_errors=True)


def generated_session(
    records: int,
    *,
    seed: int,
    fault_rate: float = 0.05,
    result_bytes: str = "100:2000",
    format: str = "claude_code",
    parallel_rate: float | None = None,
) -> Path:
    """Return one session file of `records` records in `format` from the shared generator.

    Kept under var/workloads once made (a 50,000-record one takes a few seconds).
    `parallel_rate` is the generator's share of turns with parallel calls (its default if None).
    """
    parallel = "" if parallel_rate is None else f"-p{parallel_rate}"
    name = f"{format}-r{records}-s{seed}-f{fault_rate}-b{result_bytes}{parallel}.jsonl"
    out = WORKLOADS / name
    if not out.exists():
        WORKLOADS.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=WORKLOADS)) / out.name
        subprocess.run(
            [
                sys.executable,
                str(GENERATOR),
                "--format",
                format,
                "--records",
                str(records),
                "--fault-rate",
                str(fault_rate),
                "--result-bytes",
                result_bytes,
                "--seed",
                str(seed),
                *(() if parallel_rate is None else ("--parallel-rate", str(parallel_rate))),
                "--out",
                str(building),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _keep(building, out)
        shutil.rmtree(building.parent)  # and the generator's list of the faults it made
    return out


@contextlib.contextmanager
def held_open(path: Path, mode: str) -> Iterator[int]:
    """Hold `path` open in `mode` ("ab", "rb", ...) in a child process; yield its pid.

    Stands in for an agent that keeps its session file open while it runs.
    The child is killed on exit, and sleeps at most 60 s if it is not.
    """
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "f = open(sys.argv[1], sys.argv[2])\n"
            "print('open', flush=True)\n"
            "time.sleep(60)\n",
            str(path),
            mode,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "open\n", "the child could not open the file"
            yield child.pid
        finally:
            child.kill()
            child.wait(timeout=10)
