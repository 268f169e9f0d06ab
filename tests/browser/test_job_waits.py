"""Issue 16 §4: a job whose chunks wait for S3 to come back says so on its page, and stops
saying so once the job moves again; a real worker runs the job and retries the chunk."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import sample
from tests.storage.conftest import bucket, media, s3_endpoint, s3_settings  # noqa: F401
from tests.storage.test_storage_failures import dead_s3
from transcripts import actions

pytestmark = [pytest.mark.browser, pytest.mark.s3]


@pytest.fixture
def storage_client() -> str:
    """One S3 client is enough here: the page, not the client, is under test."""
    return "boto3"


@pytest.mark.usefixtures("celery_worker")
def test_the_job_page_says_it_waits_for_storage_and_carries_on_once_it_is_back(
    page,
    live_server,
    alice,
    workspace,
    s3_settings,  # noqa: F811
):
    sessions = [
        actions.do_ingest_session(
            workspace, f"s{n}.jsonl", sample("formats/claude_code.jsonl"), acting_user=alice
        )
        for n in range(2)
    ]
    up = s3_settings.STORAGES
    s3_settings.JOB_CLAIM_LEASE = 3  # the worker retries the chunk every 3 s
    s3_settings.STORAGES = {**up, "default": dead_s3()}
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    log_in(page, live_server.url)
    page.goto(live_server.url + job.get_absolute_url())

    waiting = page.locator("#progress .waiting")
    expect(waiting).to_contain_text("Waiting for the file storage. ", timeout=20_000)
    expect(waiting).to_have_text(
        re.compile(
            r"Pairfix retries (at \d\d:\d\d:\d\d UTC \(in about \d s\)|now)\. "
            r"The operator can check /healthz and the logs\.$"
        )
    )
    expect(page.locator("#progress")).to_have_attribute("data-status", "running")
    expect(page.locator("#job-progress")).to_have_attribute("value", "0")
    screenshot(page, "job-waiting-for-storage")

    s3_settings.STORAGES = up
    expect(page.locator("#progress")).to_have_attribute("data-status", "done", timeout=30_000)
    expect(page.locator("tr.item.repaired")).to_have_count(2)
    expect(page.locator(".waiting")).to_have_count(0)
