"""Issue 16 §7: delete a session (asked, audited, blobs removed) and dismiss unreadable uploads."""

import re

import pytest
from django.core.files.storage import default_storage
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.helpers import sample
from transcripts.models import AuditRecord, Session, blob_name

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (390, 844)]


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "390x844"])
def test_unreadable_uploads_are_dismissed_after_a_question(
    page, live_server, alice, workspace, ingest, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    notes = ingest(workspace, "notes.txt", b"remember the milk\n")
    picture = ingest(workspace, "shot.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    kept = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    log_in(page, live_server.url)
    expect(page.locator(".badge.unreadable")).to_have_count(2)

    page.get_by_role("link", name="Dismiss 2 unreadable uploads…").click()
    expect(page.locator("h1")).to_have_text("Dismiss 2 unreadable uploads?")
    expect(page.locator(".confirm")).to_contain_text("notes.txt, shot.png")
    page.get_by_role("button", name="Dismiss").click()

    expect(page.locator(".messages")).to_have_text("Dismissed 2 unreadable uploads.")
    expect(page.locator(".badge.unreadable")).to_have_count(0)
    expect(page.locator(".session-table tbody tr")).to_have_count(1)
    for gone in (notes, picture):
        assert not default_storage.exists(blob_name(gone.head.sha256))
        assert AuditRecord.objects.filter(session=gone, op="delete").count() == 1
    assert default_storage.exists(blob_name(kept.head.sha256))
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]


def test_deleting_a_session_keeps_bytes_another_session_shares(
    page, live_server, alice, workspace, ingest
):
    data = sample("formats/claude_code.jsonl")
    doomed = ingest(workspace, "doomed.jsonl", data)
    twin = ingest(workspace, "twin.jsonl", data)
    log_in(page, live_server.url)
    page.goto(live_server.url + doomed.get_absolute_url())
    page.get_by_role("link", name="Delete this session…").click()
    expect(page.locator("h1")).to_have_text("Delete doomed.jsonl?")
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator("h1")).to_have_text("doomed.jsonl")

    page.get_by_role("link", name="Delete this session…").click()
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(".messages")).to_have_text("Deleted doomed.jsonl.")
    expect(page.get_by_role("link", name="doomed.jsonl")).to_have_count(0)
    expect(page.get_by_role("link", name="twin.jsonl")).to_have_count(1)
    # Same bytes: the twin still reads them.
    assert default_storage.exists(blob_name(twin.head.sha256))
    assert not Session.objects.filter(pk=doomed.pk).exists()
    response = page.goto(live_server.url + doomed.get_absolute_url())
    assert response.status == 404
    page.goto(live_server.url + "/audit/")
    deletion = page.locator("tr.audit-record").filter(
        has=page.locator("td", has_text=re.compile(r"^delete$"))
    )
    expect(deletion).to_have_count(1)
    expect(deletion).to_contain_text("doomed.jsonl")


def test_a_viewer_cannot_delete(page, live_server, alice, bob, workspace, ingest):
    from transcripts.models import Membership

    Membership.objects.create(user=bob, workspace=workspace, role=Membership.Role.VIEWER)
    session = ingest(workspace, "cc.jsonl", b"not a session")
    log_in(page, live_server.url, "bob", "bob-password")
    expect(page.locator(".badge.unreadable")).to_have_count(1)
    expect(page.get_by_role("link", name="Dismiss cc.jsonl")).to_have_count(0)
    page.goto(live_server.url + session.get_absolute_url())
    expect(page.get_by_role("link", name="Delete this session…")).to_have_count(0)
    response = page.goto(live_server.url + f"/sessions/{session.pk}/delete/")
    assert response.status == 403
