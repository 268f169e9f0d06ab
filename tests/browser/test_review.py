"""Issue 16, beyond the report: the overview ruler and a provider's error pasted into the search."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import ORPHANED_CALL, sample

pytestmark = pytest.mark.browser

CASE = "cases/01_cc-compaction-orphan-result.jsonl"
ERROR = (
    "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
    "toolu_syn_out_02. Each `tool_result` block must have a corresponding `tool_use` block"
)


def test_the_ruler_marks_each_fault_and_op_and_takes_you_there(
    page, live_server, alice, workspace, ingest
):
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    ruler = page.locator("svg.ruler")
    expect(ruler).to_be_visible()
    expect(ruler.locator("rect.mark.fault.missing_result")).to_have_count(1)
    expect(ruler.locator("rect.mark.op.insert_result")).to_have_count(1)
    # The mark is drawn in its kind's colour (--k-missing_result, #c62828), as its badge is.
    fill = ruler.locator("rect.mark.fault").evaluate("(el) => getComputedStyle(el).fill")
    assert fill == "rgb(198, 40, 40)"
    ruler.locator("a.ruler-mark").first.click()
    expect(page.locator("#r-8")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#r-8 .fault .tool-call-id")).to_have_text(ORPHANED_CALL)
    # The repaired column does not repeat "unchanged" on every row.
    expect(page.locator("td.right", has_text="unchanged")).to_have_count(0)
    screenshot(page, "session-ruler")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280x800", "390x844"])
def test_a_pasted_provider_error_lands_on_the_record_it_names(
    page, live_server, alice, workspace, ingest, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    session = ingest(workspace, "case01.jsonl", sample(CASE))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    page.get_by_label("Search").fill(ERROR)
    expect(page.locator(".provider-error-found")).to_have_text(
        "messages.0.content.1 of the request is record #9."
    )
    row = page.locator("#r-9")
    expect(row).to_have_class(re.compile(r"\bcurrent\b"))
    expect(row.locator(".fault.orphaned_result .tool-call-id")).to_have_text("toolu_syn_out_02")
    # The rows are not filtered by the error's text: the record's neighbours are there too.
    expect(page.locator("#r-8")).to_be_visible()
