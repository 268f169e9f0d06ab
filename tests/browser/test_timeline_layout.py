"""The session page's CSS, measured in a real browser: strike-through, narrow windows, dark mode."""

import pytest
from playwright.sync_api import expect

from tests.helpers import sample

pytestmark = pytest.mark.browser

DROPPED = "cases/01_cc-compaction-orphan-result.jsonl"


@pytest.fixture
def open_session(page, live_server, alice, workspace, ingest):
    def open_session(name, data):
        session = ingest(workspace, name, data)
        page.goto(live_server.url + session.get_absolute_url())
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("alice-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("h1")).to_have_text(name)
        return session

    return open_session


def decorations(locator):
    """Return the text-decoration-line of the element and of each ancestor up to the table."""
    return locator.evaluate(
        """(el) => {
            const lines = [];
            for (; el && el.tagName !== "TABLE"; el = el.parentElement) {
                lines.push(getComputedStyle(el).textDecorationLine);
            }
            return lines;
        }"""
    )


def test_only_the_dropped_record_is_struck_through(page, open_session):
    open_session("dropped.jsonl", sample(DROPPED))
    row = page.locator("tr.row.dropped")
    expect(row).to_have_count(1)
    assert "line-through" in decorations(row.locator(".cell"))[0]
    # A decoration on any ancestor would be painted through the fault box too.
    assert not any("line-through" in line for line in decorations(row.locator(".fault")))


def test_the_timeline_fits_a_420_pixel_window(page, open_session):
    page.set_viewport_size({"width": 420, "height": 900})
    long_id = "toolu_" + "X" * 120
    data = sample("formats/claude_code.jsonl").replace(
        b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", long_id.encode()
    )
    open_session("a-rather-long-session-file-name-" + "y" * 60 + ".jsonl", data)
    expect(page.locator(".fault.missing_result .tool-call-id")).to_have_text(long_id)
    widths = page.evaluate(
        """() => ({
            page: document.documentElement.scrollWidth,
            timeline: document.querySelector("table.timeline").getBoundingClientRect().right,
        })"""
    )
    assert widths["timeline"] <= 420
    assert widths["page"] <= 420


def test_it_follows_a_dark_colour_scheme(page, open_session):
    page.emulate_media(color_scheme="dark")
    open_session("claude_code.jsonl", sample("formats/claude_code.jsonl"))
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(22, 24, 28)"
