"""Issue 16 §4: offer only what can succeed; ask before what cannot be undone."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import sample, wait_for_job
from transcripts import actions
from transcripts.models import ApiToken, Job, Session

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("celery_worker")]


def test_a_job_is_rolled_back_once_after_a_question(page, live_server, alice, workspace, ingest):
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    repair = actions.do_start_job(
        workspace,
        Session.objects.filter(pk=session.pk),
        kind=Job.Kind.REPAIR,
        policy="synthesize",
        force=False,
        selection={},
        acting_user=alice,
    )
    # The worker this module runs takes the job; doing it inline as well raced it.
    wait_for_job(repair)
    log_in(page, live_server.url)
    page.goto(live_server.url + repair.get_absolute_url())

    # Asked first; cancelling changes nothing.
    page.get_by_role("link", name="Roll back this job…").click()
    expect(page.locator("h1")).to_have_text(f"Roll back job {repair.pk}?")
    expect(page.locator(".confirm")).to_contain_text("cannot be rolled back")
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(live_server.url + repair.get_absolute_url())
    assert not Job.objects.filter(kind=Job.Kind.ROLLBACK).exists()

    page.get_by_role("link", name="Roll back this job…").click()
    page.get_by_role("button", name="Roll back").click()
    expect(page.locator("h1")).to_have_text(f"Job {repair.pk + 1}: roll back job {repair.pk}")
    expect(page.locator("#progress")).to_have_attribute("data-status", "done", timeout=60_000)
    # Neither the rollback nor the job it rolled back offers another rollback.
    expect(page.get_by_role("link", name=re.compile("Roll back"))).to_have_count(0)
    page.goto(live_server.url + repair.get_absolute_url())
    expect(page.get_by_text(f"Rolled back by job {repair.pk + 1}")).to_be_visible()
    expect(page.get_by_role("link", name="Roll back this job…")).to_have_count(0)
    # Asked for by its address anyway, it is refused with the reason.
    page.goto(live_server.url + f"/jobs/{repair.pk}/rollback/confirm/")
    expect(page.locator(".messages")).to_have_text(
        f"Job {repair.pk} was rolled back already, by job {repair.pk + 1}."
    )
    assert Job.objects.filter(kind=Job.Kind.ROLLBACK).count() == 1


def test_revoking_a_token_is_asked_first(page, live_server, alice, workspace):
    token, _ = actions.do_create_api_token(workspace, "ci bot", acting_user=alice)
    log_in(page, live_server.url)
    page.goto(live_server.url + "/tokens/")
    page.get_by_role("link", name="Revoke ci bot").click()
    expect(page.locator("h1")).to_have_text("Revoke the token “ci bot”?")
    page.get_by_role("link", name="Cancel").click()
    token.refresh_from_db()
    assert token.revoked_at is None
    page.get_by_role("link", name="Revoke ci bot").click()
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    expect(page.get_by_role("link", name="Revoke ci bot")).to_have_count(0)
