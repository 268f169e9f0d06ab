"""Helpers shared by the web, jobs and browser tests."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings

from transcripts import actions
from transcripts.models import Job

SAMPLES = Path(settings.BASE_DIR) / "demo" / "samples"
ORPHANED_CALL = "toolu_01CCCCCCCCCCCCCCCCCCCCCC"


def sample(name: str) -> bytes:
    """Return the bytes of a demo sample, e.g. "formats/claude_code.jsonl"."""
    return (SAMPLES / name).read_bytes()


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
