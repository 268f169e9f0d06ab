"""Issue 16, beyond the report: search across sessions by content, with the database's FTS."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import ORPHANED_CALL, sample

pytestmark = pytest.mark.browser


def test_a_tool_call_id_finds_its_records_in_every_session(
    page, live_server, alice, bob, workspace, other_workspace, ingest
):
    data = sample("formats/claude_code.jsonl")
    mine = ingest(workspace, "mine.jsonl", data)
    ingest(workspace, "other.jsonl", sample("formats/openclaw.jsonl"))
    theirs = ingest(other_workspace, "theirs.jsonl", data, user=bob)
    log_in(page, live_server.url)
    # Showing a session builds its timeline, which indexes its records.
    for session in (mine, theirs):
        page.goto(live_server.url + session.get_absolute_url())
        if session is mine:
            expect(page.locator(".fault.missing_result")).to_have_count(1)
    page.goto(live_server.url + mine.get_absolute_url())
    page.get_by_label("Find in all sessions").fill(ORPHANED_CALL)
    page.get_by_label("Find in all sessions").press("Enter")
    # Alice's session only: bob's workspace is not hers.
    hits = page.locator("tr.hit")
    expect(hits).to_have_count(1)
    expect(hits.first).to_contain_text("mine.jsonl")
    expect(hits.first.locator(".hit-record")).to_have_text("#8")
    # FTS5 marks the id as one term, PostgreSQL's parser as two ("[toolu]_[01…]").
    snippet = hits.first.locator(".snippet")
    expect(snippet).to_contain_text("[")
    assert ORPHANED_CALL in snippet.inner_text().replace("[", "").replace("]", "")
    hits.first.locator(".hit-record").click()
    expect(page.locator("#r-8")).to_have_class(re.compile(r"\bcurrent\b"))

    # Words of the text and a tool's name, all of them required.
    page.goto(live_server.url + "/search/?q=integration+Bash")
    expect(page.locator("tr.hit")).to_have_count(1)
    page.goto(live_server.url + "/search/?q=integration+nowhere")
    expect(page.locator("tr.hit")).to_have_count(0)
