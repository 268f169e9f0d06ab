import json

import pytest
from django.urls import reverse

from tests.helpers import ORPHANED_CALL, sample
from transcripts.engine import analyze

pytestmark = pytest.mark.django_db


def url(session):
    return reverse("transcripts:download_repaired", args=[session.pk])


def body(response):
    """Return the bytes of a download, which streams."""
    assert response.streaming
    return b"".join(response.streaming_content)


def tool_ids(data):
    calls, results = [], []
    for line in data.decode().splitlines():
        content = json.loads(line).get("message", {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block["type"] == "tool_use":
                calls.append(block["id"])
            elif block["type"] == "tool_result":
                results.append(block["tool_use_id"])
    return calls, results


def test_it_answers_every_tool_call(alice_client, workspace, ingest):
    raw = sample("formats/claude_code.jsonl")
    session = ingest(workspace, "claude_code.jsonl", raw)
    response = alice_client.get(url(session))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="claude_code.jsonl"'
    assert response["Content-Type"] == "application/octet-stream"
    data = body(response)
    assert response["Content-Length"] == str(len(data))
    calls, results = tool_ids(data)
    assert ORPHANED_CALL in calls
    assert sorted(calls) == sorted(results)
    assert len(data.splitlines()) == len(raw.splitlines()) + 1
    again = analyze(data, "claude_code.jsonl")
    assert not again.plan
    # The default answers in Claude Code's own interrupt text: nothing is left to report.
    assert again.faults == []
    assert b"[Request interrupted by user for tool use]" in data


def test_it_repairs_under_the_chosen_policy(alice_client, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    response = alice_client.get(url(session), {"policy": "discard"})
    calls, results = tool_ids(body(response))
    assert ORPHANED_CALL not in calls
    assert sorted(calls) == sorted(results)


def test_it_returns_a_healthy_file_unchanged(alice_client, workspace, ingest):
    raw = sample("cases/02_cc-parallel-results-split-lines.jsonl")
    session = ingest(workspace, "healthy.jsonl", raw)
    assert body(alice_client.get(url(session))) == raw


def test_it_rejects_an_unknown_policy(alice_client, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    assert alice_client.get(url(session), {"policy": "nope"}).status_code == 400


def test_it_hides_other_workspaces_sessions(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert alice_client.get(url(theirs)).status_code == 404


def test_it_rejects_post(alice_client, workspace, ingest):
    session = ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl"))
    assert alice_client.post(url(session)).status_code == 405


def test_it_explains_an_unknown_policy_on_a_page(alice_client, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    response = alice_client.get(url(session), {"policy": "nope"})
    html = response.content.decode()
    assert response.status_code == 400
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert "There is no policy named “nope”." in html
    assert f'<a href="{session.get_absolute_url()}">Back to claude_code.jsonl</a>' in html


def test_an_unreadable_file_has_no_repaired_download(alice_client, workspace, ingest):
    session = ingest(workspace, "broken.jsonl", b'{"type": "user"\n')
    response = alice_client.get(url(session))
    assert response.status_code == 409
    assert not response.streaming
    page = response.content.decode()
    assert "Pairfix could not read this one" in page
    assert "broken.jsonl: line 2: not valid JSON" in page
    raw = reverse("transcripts:download_revision", args=[session.pk, 0])
    assert f'href="{raw}"' in page


@pytest.fixture
def live_session(workspace, alice, settings):
    """Return a session written just now whose last call is still running."""
    from django.utils import timezone

    from tests.sync.conftest import call, user
    from transcripts import actions

    settings.LIVE_GRACE = 600
    data = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
    return actions.do_ingest_session(
        workspace, "live.jsonl", data, acting_user=alice, last_write=timezone.now()
    )


def test_a_live_sessions_running_call_is_named_on_the_warning_not_a_failure(
    alice_client, live_session
):
    session = live_session
    page = alice_client.get(url(session)).content.decode()
    assert "The repaired file would still be rejected" in page
    assert "1 call at its end is still running" in page
    assert "counts as <code>pending_result</code> until" in page
    assert "repair the session with <i>Force</i> on its page" in page
    assert f"/sessions/{session.pk}/resume" in page  # what Claude Code itself would send


def test_a_live_sessions_page_offers_the_forced_repair_and_agrees_on_each_policy(
    alice_client, live_session
):
    session = live_session
    page = alice_client.get(session.get_absolute_url()).content.decode()
    # The download page's "repair with Force on its page" has a form to point at.
    assert 'name="force"' in page and 'class="session-repair"' in page
    # The menu's verdict of each policy is its own page's: these leave the running call
    # alone (the menu said "valid", reading the call as missing); openmaic answers it.
    for name in ("discard", "native", "openclaw"):
        assert f'<option value="{name}">{name}: still rejected by Anthropic</option>' in page
    assert '<option value="openmaic">openmaic: valid for Anthropic</option>' in page
