"""A job whose chunk stops because S3 is down: the job page says what it waits for, and when
the chunk is retried, until the job moves again.

The outage is real: S3's endpoint swapped for a port nothing listens on (`dead_s3`) while
the job runs; the chunks run inline, as the workers run them.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils.html import escape

from tests.helpers import sample
from tests.storage.test_storage_failures import client_for, dead_s3
from transcripts import actions
from transcripts.models import Job

pytestmark = [pytest.mark.s3, pytest.mark.django_db, pytest.mark.usefixtures("s3_settings")]

FAULTY = "formats/claude_code.jsonl"


def progress_of(client: Any, job: Job) -> str:
    """Return the job page's progress fragment, as the page's poll fetches it."""
    response = client.get(job.get_absolute_url(), headers={"HX-Request": "true"})
    assert response.status_code == 200
    return response.content.decode()


def test_the_job_page_says_what_a_chunk_waits_for_until_the_job_moves_again(
    alice, workspace, settings
):
    sessions = [
        actions.do_ingest_session(workspace, f"s{n}.jsonl", sample(FAULTY), acting_user=alice)
        for n in range(3)
    ]
    settings.JOB_CHUNK_SIZE = 2
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    first, second = actions.do_fan_out_job(job.pk)
    client = client_for(alice)
    assert "Waiting for" not in progress_of(client, job)
    up = settings.STORAGES
    settings.STORAGES = {**up, "default": dead_s3()}

    assert actions.do_run_job_items(job.pk, first) == first

    job.refresh_from_db()
    assert (job.status, job.waiting_for) == (Job.Status.RUNNING, "file storage")
    assert "Could not connect to the endpoint URL" in job.waiting_error
    assert job.retry_at is not None
    left = (job.retry_at - job.started_at).total_seconds()
    assert settings.JOB_CLAIM_LEASE - 5 < left <= settings.JOB_CLAIM_LEASE + 5
    html = progress_of(client, job)
    # A member is told what is down and when it is retried, not the storage's own words
    # (they name the endpoint): those are for the operator, as on the 503 page.
    assert "Waiting for the file storage. Pairfix retries at" in html
    assert "endpoint" not in html and "waiting-error" not in html
    assert 'The operator can check <a href="/healthz">/healthz</a> and the logs.' in html
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    staff = progress_of(client, job)
    error = escape(job.waiting_error)
    assert f'Waiting for the file storage: <span class="waiting-error">{error}</span>.' in staff
    assert "The operator can check" not in staff
    at = f'<time datetime="{job.retry_at.isoformat()}">{job.retry_at:%H:%M:%S} UTC</time>'
    assert f"Pairfix retries at {at} (in about " in html
    seconds = int(re.search(r"\(in about (\d+) s\)", html)[1])
    assert settings.JOB_CLAIM_LEASE - 10 <= seconds <= settings.JOB_CLAIM_LEASE
    assert "s left</span>" not in html  # no estimate while the bar stands still

    # Storage back: the other chunk moves the job, and the notice goes, though the
    # first chunk still waits for its retry.
    settings.STORAGES = up
    assert actions.do_run_job_items(job.pk, second) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.waiting_for, job.waiting_error, job.retry_at) == (
        Job.Status.RUNNING,
        1,
        "",
        "",
        None,
    )
    assert "Waiting for" not in progress_of(client, job)

    settings.JOB_CLAIM_LEASE = 0  # the lease has passed when the retry comes
    assert actions.do_run_job_items(job.pk, first) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.failed, job.waiting_for) == (Job.Status.DONE, 3, 0, "")


def test_a_retry_that_finds_storage_still_down_says_so_again(alice, workspace, settings):
    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    up = settings.STORAGES
    settings.STORAGES = {**up, "default": dead_s3()}
    assert actions.do_run_job_items(job.pk, ids) == ids
    job.refresh_from_db()
    noted = job.retry_at

    settings.JOB_CLAIM_LEASE = 0
    assert actions.do_run_job_items(job.pk, ids) == ids

    job.refresh_from_db()
    assert job.waiting_for == "file storage" and job.retry_at is not None
    assert noted is not None and job.retry_at < noted  # the new lease, of 0 s
    html = progress_of(client_for(alice), job)
    assert "Waiting for the file storage" in html and "Pairfix retries now." in html

    settings.STORAGES = up
    assert actions.do_run_job_items(job.pk, ids) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.waiting_for) == (Job.Status.DONE, 1, "")
