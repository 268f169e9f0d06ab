"""Issue 16 §1: repair the session on its own page, and compare any two of its revisions."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import ORPHANED_CALL, sample

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("celery_worker")]

SIZES = [(1280, 800), (390, 844)]


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "390x844"])
def test_repair_with_this_policy_then_compare_raw_with_head(
    page, live_server, alice, workspace, ingest, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url() + "?policy=discard")

    repair = page.get_by_role("button", name="Repair with this policy (discard)")
    expect(repair).to_be_visible()
    repair.click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator("h1")).to_contain_text("repair under discard")
    expect(page.locator("#progress")).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator("tr.item.repaired")).to_have_count(1)

    page.goto(live_server.url + session.get_absolute_url())
    expect(page.locator(".meta").first).to_contain_text("head revision 1 (discard)")
    # Nothing left to repair: the buttons are not offered.
    expect(page.get_by_role("button", name=re.compile("Repair with this policy"))).to_have_count(0)
    # The default comparison is the raw upload beside the head.
    expect(page.get_by_label("Compare revision")).to_have_value("0")
    expect(page.get_by_label("with revision")).to_have_value("1")
    page.get_by_role("button", name="Compare side by side").click()
    expect(page.locator("h1")).to_have_text("cc.jsonl: revision 0 beside revision 1")
    # discard drops the orphaned call's record: one row dropped, shown with its call.
    dropped = page.locator("tr.row.dropped")
    expect(dropped).to_have_count(1)
    expect(dropped.locator(".left .tool-call-id")).to_have_text(ORPHANED_CALL)
    expect(page.locator(".count-dropped")).to_have_text("1 dropped")
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]

    # Any two revisions: the head beside itself has no change at all.
    page.get_by_label("Left").select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator(".count-changed")).to_have_text("0 changed")
    expect(page.locator("tr.row.dropped, tr.row.inserted, tr.row.changed")).to_have_count(0)


def test_dry_run_from_the_session_page_writes_nothing(page, live_server, alice, workspace, ingest):
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    page.get_by_role("button", name="Dry run").click()
    expect(page.locator("h1")).to_contain_text("dry run of a repair under synthesize")
    expect(page.locator("#progress")).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator(".op-total.insert_result td").nth(1)).to_have_text("1")
    session.refresh_from_db()
    assert session.head.number == 0


def test_a_viewer_is_offered_no_repair(page, live_server, alice, bob, workspace, ingest):
    from transcripts.models import Membership

    Membership.objects.create(user=bob, workspace=workspace, role=Membership.Role.VIEWER)
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url, "bob", "bob-password")
    page.goto(live_server.url + session.get_absolute_url())
    expect(page.locator(".fault.missing_result")).to_have_count(1)
    expect(page.get_by_role("button", name="Dry run")).to_have_count(0)
