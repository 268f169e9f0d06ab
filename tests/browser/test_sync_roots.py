"""Issue 16 §6: a folder outside SYNC_ROOTS is refused with the exact line that allows it."""

import os

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (390, 844)]


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "390x844"])
def test_it_says_which_line_to_add_and_to_restart(
    page, live_server, alice, workspace, tmp_path, settings, size
):
    allowed = (tmp_path / "sync").resolve()
    allowed.mkdir()
    projects = (tmp_path / "home" / ".claude" / "projects").resolve()
    projects.mkdir(parents=True)
    settings.SYNC_ROOTS = [allowed]
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page, live_server.url)
    page.goto(live_server.url + "/sources/")
    page.get_by_label("Path").fill(str(projects))
    page.get_by_role("button", name="Add source").click()

    line = f"SYNC_ROOTS={allowed}{os.pathsep}{projects}"
    expect(page.locator(".roots-line")).to_have_text(line)
    hint = page.locator(".roots-hint")
    expect(hint).to_contain_text("add this line to the .env file")
    expect(hint).to_contain_text("then restart Pairfix")
    expect(page.locator(".errorlist")).to_contain_text(line)
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
