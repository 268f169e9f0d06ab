"""Issue 16, beyond the report: the overview ruler and a provider's error pasted into the search."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import ORPHANED_CALL, generated_sessions, sample
from transcripts.models import Timeline

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
    ruler = page.locator("nav.ruler")
    expect(ruler).to_be_visible()
    expect(ruler.locator("a.ruler-mark.of-fault.missing_result")).to_have_count(1)
    expect(ruler.locator("a.ruler-mark.of-op.insert_result")).to_have_count(1)
    # The mark is drawn in its kind's colour (--k-missing_result, #c62828), as its badge is.
    fill = ruler.locator("a.ruler-mark.of-fault").evaluate(
        "(el) => getComputedStyle(el).backgroundColor"
    )
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


def test_the_diff_view_folds_unchanged_runs_and_unfolds_in_one_click(
    page, live_server, alice, workspace, ingest
):
    path = generated_sessions(2, seed=31, records=1500)[0]
    session = ingest(workspace, path.name, path.read_bytes())
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    page.get_by_role("link", name="Changes only (unchanged runs folded)").click()
    folded = page.locator("#rows tr.folded")
    expect(folded.first).to_be_visible()
    labels = folded.all_inner_texts()
    counts = [
        int(re.fullmatch(r"… ([\d,]+) unchanged records? …", t).group(1).replace(",", ""))
        for t in labels
    ]
    shown = page.locator("#rows tr.row").count()
    rows = Timeline.objects.get(revision=session.head, policy="synthesize").row_count
    # Every row is either shown or counted in one folded line, once.
    assert sum(counts) + shown == rows
    assert shown < rows / 2
    # Each shown run holds a change or a fault.
    expect(page.locator("#rows tr.row.has-fault").first).to_be_visible()
    expect(page.locator("nav.ruler")).to_be_visible()
    page.locator("#rows tr.row.has-fault").first.scroll_into_view_if_needed()
    screenshot(page, "session-diff-ruler")

    # One click shows the full side-by-side where the folded run starts.
    start = int(folded.nth(1).locator("a").get_attribute("data-pos"))
    folded.nth(1).locator("a").click()
    expect(page.locator("#rows tr.folded")).to_have_count(0)
    expect(page.locator(f'#rows tr.row[data-pos="{start}"]')).to_be_visible()
