"""Issue 16 §5: progress that holds: uploads, timeline builds, and jobs a session at a time."""

import re
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import generated_sessions, sample
from transcripts import actions
from transcripts.models import Job, Session, Timeline

pytestmark = pytest.mark.browser


def test_an_upload_shows_how_much_is_sent(page, live_server, alice, workspace):
    path = generated_sessions(2, seed=16, records=400)[0]
    size = path.stat().st_size
    assert size > 150_000
    log_in(page, live_server.url)
    page.wait_for_load_state("load")
    # A slow link (about 60 KB/s up), so the upload takes a few seconds to watch.
    cdp = page.context.new_cdp_session(page)
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 60_000},
    )
    page.locator('input[type="file"]').set_input_files(path)
    page.get_by_role("button", name="Upload").click()
    status = page.locator(".upload-status")
    expect(status).to_contain_text("Uploading: ")
    # Binary units, named as such (the server's limits are stated in them too).
    expect(status).to_have_text(
        re.compile(r"Uploading: \d+% \(\d+(\.\d)? (bytes|KiB|MiB) of \d+\.\d (KiB|MiB)\)")
    )
    bar = page.locator("progress.upload-progress")
    expect(bar).to_be_visible()
    sent = bar.evaluate("(el) => [el.value, el.max]")
    assert 0 < sent[0] < sent[1] and sent[1] > size
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    expect(page.locator("h1")).to_have_text(path.name, timeout=30_000)
    assert page.url.endswith(Session.objects.get().get_absolute_url())


def test_a_timeline_build_shows_a_bar_until_the_timeline_replaces_it(
    page, live_server, alice, workspace, ingest, settings
):
    settings.TIMELINE_INLINE_BYTES = 100  # built by a worker; none runs until the test says
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    bar = page.locator("#timeline-progress")
    expect(bar).to_have_attribute("max", "4")
    expect(bar).to_have_attribute("value", "0")
    expect(page.locator(".build-stage")).to_have_text("queued for a worker")
    # Meanwhile a first look at the file's first records, without the fault panel.
    expect(page.locator(".preview-note")).to_be_visible()
    expect(page.locator("table.preview tr#r-0")).to_be_visible()
    expect(page.locator(".fault-panel")).to_have_count(0)
    # What a worker does; the page's poll swaps the timeline in.
    assert actions.do_build_timeline(Timeline.objects.get().pk)
    expect(page.locator(".fault-panel")).to_be_visible()
    expect(page.locator(".fault.missing_result")).to_have_count(1)
    expect(bar).to_have_count(0)
    expect(page.locator(".preview-note")).to_have_count(0)


@pytest.fixture
def paced(monkeypatch):
    """Make the worker process one session each time the test releases it."""
    gate = threading.Semaphore(0)
    real = actions.PROCESSORS[Job.Kind.REPAIR]

    def one_at_a_time(*args):
        assert gate.acquire(timeout=30), "the test did not release the next session"
        return real(*args)

    monkeypatch.setitem(actions.PROCESSORS, Job.Kind.REPAIR, one_at_a_time)
    return gate


@pytest.mark.usefixtures("celery_worker")
def test_a_job_page_advances_a_session_at_a_time(
    page, live_server, alice, workspace, ingest, settings, paced
):
    settings.JOB_CHUNK_SIZE = 2
    for path in generated_sessions(3, seed=16):
        ingest(workspace, path.name, path.read_bytes())
    job = actions.do_start_job(
        workspace, Session.objects.order_by("pk"), policy="synthesize", acting_user=alice
    )
    log_in(page, live_server.url)
    page.goto(live_server.url + job.get_absolute_url())
    bar = page.locator("#job-progress")
    expect(bar).to_have_attribute("value", "0")

    # One session processed: the bar moves by one, though its chunk of two is not written yet.
    paced.release()
    expect(bar).to_have_attribute("value", "1", timeout=10_000)
    expect(page.locator(".processed")).to_have_text("1 of 3 sessions processed")
    expect(page.locator("tr.item td:nth-child(2)").first).to_have_text("Running")

    # The chunk is written: those sessions' rows change without a reload.
    paced.release()
    expect(bar).to_have_attribute("value", "2", timeout=10_000)
    expect(page.locator("tr.item.repaired")).to_have_count(2, timeout=10_000)
    expect(page.locator("#progress")).to_have_attribute("data-status", "running")
    screenshot(page, "job-mid-run")

    paced.release()
    expect(page.locator("#progress")).to_have_attribute("data-status", "done", timeout=30_000)
    expect(page.locator("tr.item.repaired")).to_have_count(3)
