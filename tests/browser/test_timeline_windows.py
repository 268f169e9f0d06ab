"""The session timeline in a real browser: windows as you scroll, jumps, faults by key, filters.

Screenshots of the session page, the list and the overview go to var/screenshots/.
"""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import expect

from tests.helpers import generated_session, sample
from transcripts import actions, timeline
from transcripts.engine import analyze
from transcripts.models import Session

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(settings.VAR_DIR) / "screenshots"


@pytest.fixture(scope="module")
def big_file():
    return generated_session(50_000, seed=5, fault_rate=0.05, result_bytes="100:400")


@pytest.fixture(scope="module")
def mid_file():
    return generated_session(1000, seed=11, fault_rate=0.3)


@pytest.fixture
def log_in(page, live_server, alice):
    def log_in(path):
        page.goto(live_server.url + "/accounts/login/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("alice-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("h1")).to_have_text("Sessions")
        # Afterwards: a login redirect would drop the #fragment of a deep link.
        page.goto(live_server.url + path)
        return page

    return log_in


def stored(workspace, alice, path):
    """Store the file as a session and build its timeline as the worker would."""
    session = actions.do_ingest_session(workspace, path.name, path.read_bytes(), acting_user=alice)
    built = actions.timeline_for(session, "synthesize")
    actions.do_build_timeline(built.pk)
    return session


def positions(page):
    return page.eval_on_selector_all("#rows tr.row", "rows => rows.map(r => Number(r.dataset.pos))")


def current(page):
    return page.evaluate("document.querySelector('#rows tr.row.current')?.id")


def in_view(page, anchor):
    return page.evaluate(
        """(id) => {
            const box = document.getElementById(id).getBoundingClientRect();
            return box.bottom > 0 && box.top < window.innerHeight;
        }""",
        anchor,
    )


def fault_anchors(path):
    """Return the element ids of the rows with faults, in order, straight from the engine."""
    rows = analyze(path.read_bytes(), path.name).rows
    return [f"r-{row.left.index}" for row in rows if row.faults]


def test_a_50000_record_session_scrolls_jumps_and_links(
    page, log_in, live_server, workspace, alice, big_file
):
    page.set_viewport_size({"width": 1280, "height": 800})
    session = stored(workspace, alice, big_file)
    faults = fault_anchors(big_file)
    assert len(faults) > 10
    log_in(session.get_absolute_url())
    expect(page.locator("#rows tr.row")).to_have_count(timeline.WINDOW_ROWS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "session.png"))

    # Scrolling down loads the next windows, in order.
    for windows in (2, 3):
        page.locator("#rows tr.more.after").scroll_into_view_if_needed()
        expect(page.locator("#rows tr.row")).to_have_count(windows * timeline.WINDOW_ROWS)
    assert positions(page) == list(range(3 * timeline.WINDOW_ROWS))

    # Jump to a record far away: its window replaces the rows.
    page.get_by_label("Jump to record").fill("42000")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#r-42000")).to_have_class(re.compile(r"^row same( not-sent)? current$"))
    assert in_view(page, "r-42000")
    assert page.url.endswith("#r-42000")

    # `n` past the loaded rows asks for the next fault's window.
    after = next(a for a in faults if int(a[2:]) > 42000 + timeline.WINDOW_ROWS)
    page.locator("#r-42000").focus()
    while current(page) != after:
        before = current(page)
        page.keyboard.press("n")
        expect(page.locator("#rows tr.row.current")).not_to_have_id(before)
    assert in_view(page, after)

    # A deep link opens the window of its record: followed in the page, or loaded afresh.
    page.goto(page.url.split("#")[0] + "#r-7")
    expect(page.locator("#r-7")).to_have_class(re.compile(r"^row same( not-sent)? current$"))
    page.goto("about:blank")
    page.goto(f"{live_server.url}{session.get_absolute_url()}#r-31234")
    expect(page.locator("#r-31234")).to_have_class(re.compile(r"^row same( not-sent)? current$"))
    assert in_view(page, "r-31234")


def test_n_p_j_and_k_go_from_fault_to_fault(page, log_in, workspace, alice, mid_file):
    session = stored(workspace, alice, mid_file)
    faults = fault_anchors(mid_file)
    log_in(session.get_absolute_url())
    for anchor in faults[:4]:
        page.keyboard.press("n")
        expect(page.locator("#rows tr.row.current")).to_have_id(anchor)
        assert page.evaluate("document.activeElement.id") == anchor
    page.keyboard.press("p")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[2])
    page.keyboard.press("j")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[3])
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[1])
    # Typing in the search box is not navigation.
    page.get_by_label("Search").press("n")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[1])


def test_the_last_fault_says_there_are_no_more(page, log_in, workspace, alice, mid_file):
    session = stored(workspace, alice, mid_file)
    faults = fault_anchors(mid_file)
    log_in(session.get_absolute_url() + f"#{faults[-1]}")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[-1])
    page.keyboard.press("n")
    expect(page.locator("#timeline-status")).to_have_text("No more faults below.")
    expect(page.locator("#rows tr.row.current")).to_have_id(faults[-1])


def test_the_fault_panel_scrolls_to_a_fault(page, log_in, workspace, alice, mid_file):
    session = stored(workspace, alice, mid_file)
    faults = fault_anchors(mid_file)
    log_in(session.get_absolute_url())
    far = faults[-3]
    page.locator(f'.fault-panel a[data-anchor="{far}"]').click()
    expect(page.locator("#rows tr.row.current")).to_have_id(far)
    assert in_view(page, far)


def test_expanding_a_long_tool_result(page, log_in, workspace, alice):
    output = "\\n".join(f"line {n} of the output" for n in range(40))
    data = sample("formats/claude_code.jsonl").replace(b"1 failed, 9 passed", output.encode())
    session = actions.do_ingest_session(workspace, "long.jsonl", data, acting_user=alice)
    log_in(session.get_absolute_url())
    result = page.locator("#r-5 td.left .block.result")
    expect(result.locator("pre")).to_contain_text("line 5 of the output")
    expect(result.locator("pre")).not_to_contain_text("line 6 of the output")
    result.get_by_role("link", name="Show all 40 lines").click()
    expanded = page.locator("#r-5 td.left .block.result")
    expect(expanded.locator("pre")).to_contain_text("line 39 of the output")
    expanded.get_by_role("link", name="Show less").click()
    expect(page.locator("#r-5 td.left .block.result pre")).not_to_contain_text("line 39")


def test_the_filters(page, log_in, workspace, alice, mid_file):
    session = stored(workspace, alice, mid_file)
    rows = analyze(mid_file.read_bytes(), mid_file.name).rows
    log_in(session.get_absolute_url())

    page.get_by_label("Only faults").check()
    expect(page).to_have_url(re.compile(r"faults=1"))
    wanted = [i for i, row in enumerate(rows) if row.faults or row.status != "same"]
    expect(page.locator("#rows tr.row")).to_have_count(min(len(wanted), timeline.WINDOW_ROWS))
    assert positions(page) == wanted[: timeline.WINDOW_ROWS]
    page.get_by_label("Only faults").uncheck()
    expect(page.locator("#rows tr.row")).to_have_count(timeline.WINDOW_ROWS)
    expect(page.locator("#rows tr.row").first).to_have_attribute("data-pos", "0")

    page.get_by_label("Only tool traffic").check()
    tools = [
        i
        for i, row in enumerate(rows)
        if any(c is not None and (c.calls or c.results) for c in (row.left, row.right))
    ]
    expect(page.locator("#rows tr.row").first).to_have_attribute("data-pos", str(tools[0]))
    assert positions(page) == tools[: timeline.WINDOW_ROWS]
    page.get_by_label("Only tool traffic").uncheck()

    row = next(r for r in rows[600:] if r.left and r.left.calls)
    call_id = row.left.calls[0][0]
    page.get_by_label("Search").fill(call_id)
    expect(page.locator(f"#r-{row.left.index}")).to_be_visible()
    assert page.locator("#rows tr.row").count() <= 3


def test_screenshots_of_the_list_and_the_overview(page, log_in, workspace, alice, mid_file):
    for name in [
        "formats/claude_code.jsonl",
        "formats/codex_rollout.jsonl",
        "formats/openclaw.jsonl",
    ]:
        actions.do_ingest_session(workspace, name.split("/")[1], sample(name), acting_user=alice)
    stored(workspace, alice, mid_file)
    # Spread the sessions over the last days, so that the chart has bars.
    for n, session in enumerate(Session.objects.order_by("pk")):
        Session.objects.filter(pk=session.pk).update(created=timezone.now() - timedelta(days=3 * n))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in("/")
    expect(page.locator(".session-table tbody tr")).to_have_count(4)
    page.screenshot(path=str(SCREENSHOTS / "list.png"), full_page=True)
    page.goto(page.url.split("?")[0] + "overview/")
    expect(page.locator("svg.chart rect.k").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "overview.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 420, "height": 900})
    page.goto(page.url.split("overview/")[0] + f"sessions/{Session.objects.order_by('-pk')[0].pk}/")
    expect(page.locator("#rows tr.row").first).to_be_visible()
    widths = page.evaluate("document.documentElement.scrollWidth")
    assert widths <= 420
    page.screenshot(path=str(SCREENSHOTS / "session-narrow-dark.png"))
