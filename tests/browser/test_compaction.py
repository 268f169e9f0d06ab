"""Issue 16 §2: the history before the last compaction is marked as not sent, its faults apart."""

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import ORPHANED_CALL, sample

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (390, 844)]
LIVE_CALL = "toolu_01LIVELIVELIVELIVELIVELI"


def _line(**values):
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/demo",
        "sessionId": "11111111-2222-4333-8444-555555555555",
        "version": "2.0.50",
        "gitBranch": "main",
    }
    return json.dumps(base | values, separators=(",", ":")).encode() + b"\n"


def compacted_session() -> bytes:
    """Return the Claude Code sample (an orphaned call at record 8), compacted after record 10.

    After the boundary (record 11) and its summary, a new call goes unanswered:
    the one fault the provider sees.
    """
    before = sample("formats/claude_code.jsonl")
    last = json.loads(before.splitlines()[-1])["uuid"]
    after = [
        _line(
            parentUuid=None,
            logicalParentUuid=last,
            type="system",
            subtype="compact_boundary",
            content="Conversation compacted",
            isMeta=False,
            level="info",
            uuid="cccccccc-0000-4000-8000-000000000001",
            timestamp="2025-11-01T11:00:00.000Z",
        ),
        _line(
            parentUuid="cccccccc-0000-4000-8000-000000000001",
            type="user",
            isCompactSummary=True,
            message={"role": "user", "content": "This session is being continued: tests."},
            uuid="cccccccc-0000-4000-8000-000000000002",
            timestamp="2025-11-01T11:00:01.000Z",
        ),
        _line(
            parentUuid="cccccccc-0000-4000-8000-000000000002",
            type="assistant",
            message={
                "model": "claude-sonnet-4-5-20250929",
                "id": "msg_01LIVE",
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": LIVE_CALL,
                        "name": "Bash",
                        "input": {"command": "ls"},
                    }
                ],
            },
            uuid="cccccccc-0000-4000-8000-000000000003",
            timestamp="2025-11-01T11:00:02.000Z",
        ),
        _line(
            parentUuid="cccccccc-0000-4000-8000-000000000003",
            type="user",
            message={"role": "user", "content": "Never mind."},
            uuid="cccccccc-0000-4000-8000-000000000004",
            timestamp="2025-11-01T11:00:03.000Z",
        ),
    ]
    return before + b"".join(after)


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "390x844"])
def test_rows_before_the_compaction_are_marked_and_their_faults_listed_apart(
    page, live_server, alice, workspace, ingest, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    session = ingest(workspace, "compacted.jsonl", compacted_session())
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())

    # The provider's view is unchanged: one fault, the live one.
    expect(page.locator("#faults-title .count")).to_have_text("1")
    expect(page.locator(".fault-panel .fault-list:not(.would-be-list) .tool-call-id")).to_have_text(
        LIVE_CALL
    )
    expect(page.locator(".compaction-count")).to_contain_text(
        "1 fault before the compaction at record 11"
    )
    # Records 0 to 10 are shown as not sent; the boundary and what follows are sent.
    not_sent = page.locator("tr.row.not-sent")
    expect(not_sent).to_have_count(11)
    expect(page.locator("#r-8 .label.not-sent")).to_have_text(
        "not sent (before compaction at record 11)"
    )
    expect(page.locator("#r-11.not-sent, #r-13.not-sent")).to_have_count(0)
    # The orphaned call before the compaction is a would-be fault, listed apart.
    expect(page.locator("#before-compaction .count")).to_have_text("1")
    would_be = page.locator(".would-be-list li")
    expect(would_be).to_have_count(1)
    expect(would_be.locator(".badge")).to_have_text("missing_result")
    expect(would_be.locator(".tool-call-id")).to_have_text(ORPHANED_CALL)
    expect(page.locator("#r-8 .fault.would-be .tool-call-id")).to_have_text(ORPHANED_CALL)
    # It is not a fault the repair mends: only the live call gets a result.
    expect(page.locator("tr.row.inserted")).to_have_count(1)
    expect(page.locator("tr.row.inserted .tool-call-id")).to_have_text(LIVE_CALL)
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
