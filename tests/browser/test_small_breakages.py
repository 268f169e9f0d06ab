"""Issue 16 §9: the small breakages a first try met."""

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.helpers import sample
from transcripts.models import ApiToken, Session, SyncSource

pytestmark = pytest.mark.browser

# Each word of the session page's text that a line break splits: [word, pieces].
BROKEN_WORDS = """() => {
    const broken = [];
    const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        // Words as a reader sees them: between spaces, of letters and digits, up to 14
        // long; a longer or spaceless token (an id, a JSON blob) may break anywhere.
        for (const match of node.textContent.matchAll(/\\S+/gu)) {
            const word = /^[\\p{P}\\p{S}]*([\\p{L}\\p{N}]{2,14})[\\p{P}\\p{S}]*$/u.exec(match[0]);
            if (!word) {
                continue;
            }
            const start = match.index + match[0].indexOf(word[1]);
            const range = document.createRange();
            range.setStart(node, start);
            range.setEnd(node, start + word[1].length);
            const lines = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
            if (lines.size > 1) {
                broken.push([word[1], lines.size]);
            }
        }
    }
    return broken;
}"""


def test_running_the_demo_again_keeps_its_users_logged_in(page, live_server, settings):
    settings.SYNC_ROOTS = []
    call_command("demo")
    log_in(page, live_server.url, "demo", "pairfix-demo")
    expect(page.locator("h1")).to_have_text("Sessions")
    call_command("demo")  # what each `make run` does
    page.reload()
    expect(page.locator("h1")).to_have_text("Sessions")
    expect(page.locator(".logout span")).to_have_text("demo")


def test_a_token_is_made_once_and_its_secret_shown_once(page, live_server, alice, workspace):
    log_in(page, live_server.url)
    page.goto(live_server.url + "/tokens/")
    page.get_by_label("Name").fill("ci bot")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator(".token-secret")
    expect(secret).to_have_count(1)
    assert secret.inner_text().startswith(ApiToken.objects.get().prefix)
    page.reload()
    expect(page.locator(".token-secret")).to_have_count(0)
    assert ApiToken.objects.count() == 1


def test_toggling_the_filters_quickly_logs_no_error(page, live_server, alice, workspace, ingest):
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    only_faults = page.get_by_label("Only faults")
    for _ in range(30):
        only_faults.click()
    # An even number of clicks: unchecked, and the rows say so once the last answer is in.
    expect(only_faults).not_to_be_checked()
    expect(page.locator("#rows tr.row")).to_have_count(12)
    # The console check of the page fixture fails the test on a CSP report or an abort.


def test_no_word_breaks_mid_word_on_a_narrow_session_page(
    page, live_server, alice, workspace, ingest
):
    page.set_viewport_size({"width": 390, "height": 844})
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    page.goto(live_server.url + session.get_absolute_url())
    expect(page.locator(".fault.missing_result")).to_have_count(1)
    broken = page.evaluate(BROKEN_WORDS)
    assert broken == [], broken
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("width", [1280, 390])
def test_the_overview_fits_the_window(page, live_server, alice, workspace, ingest, width):
    page.set_viewport_size({"width": width, "height": 844})
    # A source named as folders are: long, with no space to wrap at.
    source = SyncSource.objects.create(
        workspace=workspace,
        name="-home-dev-work-customer-portal-backend-services-payments",
        path="/srv/agents/projects",
    )
    for name in (
        "formats/claude_code.jsonl",
        "formats/openclaw.jsonl",
        "formats/codex_rollout.jsonl",
    ):
        session = ingest(workspace, name.split("/")[1], sample(name))
        Session.objects.filter(pk=session.pk).update(source=source)
    log_in(page, live_server.url)
    page.goto(live_server.url + "/overview/")
    expect(page.locator("#by-kind")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    if width == 390:
        screenshot(page, "overview-390")
