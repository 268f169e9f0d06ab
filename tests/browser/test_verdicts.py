"""Issue 16 §3: the provider's verdict beside each download and policy; a warning first."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import sample

pytestmark = pytest.mark.browser

CASE = "cases/01_cc-compaction-orphan-result.jsonl"
ERROR = "messages.0: Did not find 0 `tool_result` block(s) at the beginning of this message."


@pytest.fixture
def case_page(page, live_server, alice, workspace, ingest):
    session = ingest(workspace, "case01.jsonl", sample(CASE))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    return page


def test_each_policy_says_whether_anthropic_would_accept_the_repaired_file(case_page):
    page = case_page
    policy = page.get_by_label("Policy")
    # The default's label also says what it writes (issue 14), then the verdict.
    expect(policy.locator('option[value="synthesize"]')).to_have_text(
        re.compile(r"^synthesize \(default: .*\): valid for Anthropic$")
    )
    expect(policy.locator('option[value="openmaic"]')).to_have_text(
        "openmaic: still rejected by Anthropic"
    )
    # The raw upload is rejected; repaired under synthesize it is valid, and downloads at once.
    expect(page.locator(".downloads .verdict").first).to_have_text(
        "rejected by Anthropic if sent as it is"
    )
    expect(page.locator(".repaired-verdict")).to_have_text("valid for Anthropic")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download repaired (synthesize)").click()
    assert download.value.suggested_filename == "case01.jsonl"


def test_a_download_that_would_still_fail_is_warned_about_first(case_page):
    page = case_page
    page.get_by_label("Policy").select_option("openmaic")
    verdict = page.locator(".repaired-verdict")
    expect(verdict).to_contain_text("still rejected by Anthropic: " + ERROR[:60])
    page.get_by_role("link", name="Download repaired (openmaic)").click()
    expect(page.locator("h1")).to_have_text("The repaired file would still be rejected")
    expect(page.locator(".provider-error").first).to_contain_text(ERROR)
    with page.expect_download() as download:
        page.get_by_role("link", name="Download anyway").click()
    with open(download.value.path(), "rb") as f:
        assert f.read() == sample(CASE)  # openmaic leaves case 01 as it is
