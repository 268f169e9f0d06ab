"""The whole path a user takes: log in, upload, see the fault, bulk-repair, download."""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.helpers import ORPHANED_CALL, SAMPLES

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("celery_worker")]

UPLOAD = SAMPLES / "formats" / "claude_code.jsonl"


def tool_pairs(lines):
    calls, results = set(), set()
    for line in lines:
        content = json.loads(line).get("message", {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block["type"] == "tool_use":
                calls.add(block["id"])
            elif block["type"] == "tool_result":
                results.add(block["tool_use_id"])
    return calls, results


def test_upload_inspect_bulk_repair_and_download(page, live_server, alice, workspace):
    page.goto(live_server.url + "/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()

    page.locator('input[type="file"]').set_input_files(UPLOAD)
    page.get_by_role("button", name="Upload").click()

    # The session page highlights the orphaned call with its fault kind.
    expect(page.locator("h1")).to_have_text("claude_code.jsonl")
    fault = page.locator(".fault.missing_result")
    expect(fault).to_have_count(1)
    expect(fault.locator(".tool-call-id")).to_have_text(ORPHANED_CALL)
    expect(fault.locator(".badge")).to_have_text("missing_result")
    expect(page.locator("tr.row.inserted .label")).to_have_text("inserted")

    # htmx swaps in the repaired side under another policy.
    page.get_by_label("Policy").select_option("discard")
    expect(page.locator("#timeline th").nth(2)).to_have_text("Repaired (discard)")
    expect(page.locator("tr.row.inserted")).to_have_count(0)
    expect(page.locator(".op.drop_call")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"\?policy=discard$"))

    page.get_by_role("link", name="Pairfix").click()
    page.get_by_label("Select claude_code.jsonl").check()
    page.get_by_label("Policy").select_option("synthesize")
    page.get_by_role("button", name="Repair", exact=True).click()

    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    progress = page.locator("#progress")
    expect(progress).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator("#job-progress")).to_have_attribute("value", "1")
    expect(page.locator("tr.item.repaired")).to_have_count(1)
    expect(page.locator("tr.audit-record.missing_result code")).to_have_text(ORPHANED_CALL)

    page.get_by_role("link", name="claude_code.jsonl").click()
    expect(page.locator(".fault.missing_result")).to_have_count(0)
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download repaired").click()
    download = download_info.value
    assert download.suggested_filename == "claude_code.jsonl"
    with open(download.path(), "rb") as f:
        repaired = f.read().splitlines(keepends=True)
    original = UPLOAD.read_bytes().splitlines(keepends=True)

    calls, results = tool_pairs(repaired)
    assert ORPHANED_CALL in calls
    assert calls == results

    # Exactly one line was inserted: the synthetic result for the orphaned call.
    assert len(repaired) == len(original) + 1
    inserted = [line for line in repaired if line not in original]
    assert len(inserted) == 2  # the inserted result and the re-pointed line
    inserted_result = next(line for line in inserted if ORPHANED_CALL.encode() in line)
    new_parent = json.loads(inserted_result)["uuid"]
    at = repaired.index(inserted_result)
    kept = repaired[:at] + repaired[at + 1 :]

    # Every original line is there, in order, byte for byte, except the one whose
    # parentUuid now points at the inserted result, and that line differs in
    # nothing else.
    changed = [(old, new) for old, new in zip(original, kept, strict=True) if old != new]
    assert len(changed) == 1
    old, new = changed[0]
    old_parent = json.loads(old)["parentUuid"]
    assert old_parent != new_parent
    assert new == old.replace(
        f'"parentUuid":"{old_parent}"'.encode(), f'"parentUuid":"{new_parent}"'.encode()
    )


def test_dropping_files_on_the_drop_zone_uploads_them(page, live_server, alice, workspace):
    page.goto(live_server.url + "/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()
    # The drop handler is attached by a deferred script: wait for it, or the drop is lost.
    expect(page.locator("h1")).to_have_text("Sessions")
    page.wait_for_load_state("load")

    # What a browser hands the page when a file is dragged in from the desktop.
    drop = page.evaluate_handle(
        """([name, text]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], name));
            return transfer;
        }""",
        ["dropped.jsonl", UPLOAD.read_text()],
    )
    page.locator(".dropzone").dispatch_event("drop", {"dataTransfer": drop})

    expect(page.locator("h1")).to_have_text("dropped.jsonl")
    expect(page.locator(".fault.missing_result .tool-call-id")).to_have_text(ORPHANED_CALL)
