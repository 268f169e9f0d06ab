"""Issue 16 §8: select-all, job controls above the list, the audit trail, invalid filters."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import sample
from transcripts import views
from transcripts.models import Job

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (390, 844)]


@pytest.fixture
def sessions(workspace, ingest, monkeypatch):
    monkeypatch.setattr(views, "SESSIONS_PER_PAGE", 3)
    data = sample("formats/claude_code.jsonl")
    made = [ingest(workspace, f"cc-{i}.jsonl", data) for i in range(5)]
    made.append(ingest(workspace, "zz.jsonl", data))
    return made


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "390x844"])
def test_select_all_on_the_page_then_all_matching_the_filter(
    page, live_server, alice, sessions, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page, live_server.url)
    page.goto(live_server.url + "/?q=cc")
    # The job controls come before the list, not after a page of rows.
    controls = page.locator("fieldset.job-options").bounding_box()
    table = page.locator("table.session-table").bounding_box()
    assert controls["y"] + controls["height"] <= table["y"]

    page.get_by_label("Select all on this page").check()
    boxes = page.locator('input[name="sessions"]')
    expect(boxes).to_have_count(3)
    for i in range(3):
        expect(boxes.nth(i)).to_be_checked()
    expect(page.locator(".selected-count")).to_have_text("3 selected on this page.")
    page.get_by_role("button", name="Select all 5 sessions matching the filter").click()
    expect(page.locator(".selected-count")).to_have_text("All 5 sessions are selected.")
    expect(page.locator('input[name="scope"][value="filter"]')).to_be_checked()
    if size[0] == 1280:
        screenshot(page, "list-select-all")

    page.get_by_role("button", name="Dry run").click()
    expect(page.locator("h1")).to_contain_text("dry run")
    job = Job.objects.get()
    assert job.total == 5
    assert job.selection == {"q": "cc"}
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]


def test_unticking_one_box_leaves_the_rest_selected(page, live_server, alice, sessions):
    log_in(page, live_server.url)
    page.goto(live_server.url + "/?q=cc")
    page.get_by_label("Select all on this page").check()
    page.locator('input[name="sessions"]').first.uncheck()
    expect(page.locator(".selected-count")).to_have_text("2 selected on this page.")
    assert page.get_by_label("Select all on this page").evaluate("(el) => el.indeterminate")
    expect(page.locator('input[name="scope"][value="selected"]')).to_be_checked()


def test_an_invalid_filter_value_is_refused_not_ignored(page, live_server, alice, sessions):
    log_in(page, live_server.url)
    response = page.goto(live_server.url + "/?live=live")
    assert response.status == 400
    expect(page.locator(".error")).to_contain_text(
        "The filter is not valid: Live “live”: Select a valid choice."
    )
    expect(page.locator('input[name="sessions"]')).to_have_count(0)
    # "All matching" cannot take every session either.
    page.locator('input[name="scope"][value="filter"]').check()
    page.get_by_role("button", name="Dry run").click()
    expect(page.locator(".repair-form .errorlist").first).to_contain_text("The filter is not valid")
    # The refused form's page is the page it came from: the same filter, still refused.
    expect(page.locator("p.error")).to_contain_text(
        "The filter is not valid: Live “live”: Select a valid choice."
    )
    expect(page.locator('input[name="sessions"]')).to_have_count(0)
    assert not Job.objects.exists()


def test_the_audit_trail_lists_newest_first_and_filters_by_session_name(
    page, live_server, alice, sessions
):
    log_in(page, live_server.url)
    page.goto(live_server.url + "/audit/")
    first = page.locator("tr.audit-record").first
    expect(first).to_contain_text("zz.jsonl")  # ingested last
    page.get_by_label("Session name contains").fill("cc-3")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tr.audit-record")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("cc-3.jsonl")
    response = page.goto(live_server.url + "/audit/?session=abc")
    assert response.status == 400
    expect(page.locator(".error")).to_contain_text("Session id “abc”: Enter a whole number.")
