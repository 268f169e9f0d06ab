import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright

# Playwright's sync API runs an event loop in this thread; the ORM calls the
# fixtures make from it are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Return Debian's chromium driven by Playwright (never a downloaded browser)."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Any]:
    """Return a fresh page; the test fails on any console error or uncaught exception.

    A Content-Security-Policy violation is reported as a console error too, so
    an inline style or script that the policy blocks fails the test that met it.
    """
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    # A page served with an error status on purpose (a form's 400 saying what is wrong)
    # makes Chromium log "Failed to load resource": that is the page working, not failing.
    documents: set[str] = set()

    def on_response(response: Any) -> None:
        if response.request.resource_type == "document" and response.status >= 400:
            documents.add(response.url)

    def on_console(message: Any) -> None:
        if message.type != "error":
            return
        url = message.location.get("url", "")
        if message.text.startswith("Failed to load resource") and url in documents:
            return
        errors.append(f"console: {message.text} ({url or page.url})")

    page.on("response", on_response)
    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error} ({page.url})"))
    yield page
    context.close()
    assert not errors, "the pages logged errors:\n" + "\n".join(errors)


def log_in(page: Any, url: str, username: str = "alice", password: str = "alice-password") -> None:
    """Log in through the login form at `url` (the site's root)."""
    page.goto(url + "/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(url + "/")


SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def screenshot(page: Any, name: str, full_page: bool = False) -> Path:
    """Write a screenshot of `page` (the window, or the whole page) to var/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
