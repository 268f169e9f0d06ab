"""In a real browser, a session of hostile payloads runs nothing and loads nothing from afar."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Route, expect

from tests import hostile
from tests.helpers import wait_for_job
from transcripts import actions

# A worker builds the timeline of a session this large while the page polls.
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("celery_worker")]

# Runs before any page script: collects what the CSP blocked, and dialogs cannot wait.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


class Watch:
    """What a page did that it must not: dialogs, requests to other origins, CSP violations."""

    def __init__(self, page: Any, origin: str) -> None:
        self.page = page
        self.origin = origin
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        page.on("dialog", self._dialog)
        page.context.add_init_script(WATCH)
        # Every request is seen here; one for another origin is recorded and never sent.
        page.context.route("**/*", self._route)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _route(self, route: Route) -> None:
        url = route.request.url
        if url.startswith(self.origin + "/") or url.startswith("data:"):
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort()

    def check(self) -> None:
        """Fail if anything ran, opened, loaded or was blocked on the current page."""
        state = self.page.evaluate(
            """() => ({
                pwned: window.__pwned ?? null,
                violations: window.__violations,
                inlineScripts: document.querySelectorAll("script:not([src])").length,
                injected: document.querySelectorAll(
                    "main svg, main img, main iframe, main style, main link, main base, main meta"
                ).length,
            })"""
        )
        assert state == {"pwned": None, "violations": [], "inlineScripts": 0, "injected": 0}
        assert self.dialogs == []
        assert self.foreign == []


@pytest.fixture
def watched(page: Any, live_server: Any) -> Iterator[Watch]:
    yield Watch(page, live_server.url)


def _log_in(page: Any, url: str) -> None:
    page.goto(url + "/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("h1")).to_have_text("Sessions")


def test_a_hostile_session_runs_nothing_and_loads_nothing_from_elsewhere(
    page, watched, live_server, alice, workspace
):
    session = actions.do_ingest_session(
        workspace,
        "<img src=x onerror=alert(1)>.jsonl",
        hostile.claude_code_session(big_line=True, nested_depth=500),
        acting_user=alice,
    )
    job = wait_for_job(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    _log_in(page, live_server.url)
    watched.check()

    page.goto(live_server.url + session.get_absolute_url())
    expect(page.locator("h1")).to_have_text("<img src=x onerror=alert(1)>.jsonl")
    # Readable: the payloads are there as text, once the worker has built the timeline.
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text(
        "<script>window.__pwned = 1; alert('script')</script>", timeout=60_000
    )
    expect(timeline).to_contain_text("[U+202E]gnp.exe")
    # Hovering and clicking payload text does nothing either.
    blocks = page.locator("#timeline .block")
    expect(blocks.first).to_be_visible()
    for block in blocks.all()[:8]:
        block.hover()
        block.click()
    watched.check()
    # htmx swaps a cut block for the whole of it (the 10 MB line among them): still inert.
    show_all = page.locator("#timeline a.expand", has_text="Show all")
    expect(show_all.first).to_be_visible()
    for _ in range(min(3, show_all.count())):
        before = show_all.count()
        show_all.first.click()
        expect(show_all).to_have_count(before - 1)
    watched.check()

    # htmx swaps the timeline under the CSP: no eval, no injected styles.
    page.get_by_label("Policy").select_option("discard")
    expect(page.locator("#timeline th").nth(2)).to_have_text("Repaired (discard)")
    expect(page).to_have_url(re.compile(r"\?policy=discard$"))
    watched.check()

    for url in [job.get_absolute_url(), "/audit/", "/"]:
        page.goto(live_server.url + url)
        expect(page.locator("main")).to_contain_text("<img src=x onerror=alert(1)>.jsonl")
        watched.check()


def test_the_api_docs_work_under_the_csp(page, watched, live_server):
    page.goto(live_server.url + "/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Pairfix API", timeout=30_000)
    expect(page.locator(".opblock").first).to_be_visible()
    # Swagger UI draws with SVG and styles of its own: only what the CSP blocked counts.
    assert page.evaluate("window.__violations") == []
    assert (watched.dialogs, watched.foreign) == ([], [])
