import json

import pytest
from django.urls import reverse

from tests.helpers import ORPHANED_CALL, sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))


def test_it_shows_the_fault_kind_and_tool_call_id(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<div class="fault missing_result">' in html
    assert f'<code class="tool-call-id">{ORPHANED_CALL}</code>' in html
    assert "Provider error: " in html
    assert "tool_use" in html


def test_it_marks_the_inserted_result(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<tr class="row inserted">' in html
    assert '<span class="label">inserted</span>' in html
    assert '<span class="op insert_result"' in html


def test_it_renders_the_repaired_side_under_the_chosen_policy(alice_client, session):
    html = alice_client.get(session.get_absolute_url(), {"policy": "discard"}).content.decode()
    assert "Repaired (discard)" in html
    assert '<tr class="row inserted">' not in html
    assert "?policy=discard" in html


def test_it_renders_only_the_timeline_for_htmx(alice_client, session):
    response = alice_client.get(
        session.get_absolute_url(), {"policy": "discard"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="timeline">')
    assert "<html" not in html
    assert "Repaired (discard)" in html


def test_it_rejects_an_unknown_policy(alice_client, session):
    response = alice_client.get(session.get_absolute_url(), {"policy": "nope"})
    assert response.status_code == 400


def test_it_escapes_transcript_content(alice_client, workspace, ingest):
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": hostile},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_<b>x</b>",
                        "type": "function",
                        "function": {"name": "run", "arguments": "{}"},
                    }
                ],
            },
        ],
    }
    session = ingest(workspace, "hostile.json", json.dumps(body).encode())
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_hides_other_workspaces_sessions(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert alice_client.get(theirs.get_absolute_url()).status_code == 404


def test_it_lists_the_revisions(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "0 (raw)" in html
    assert reverse("transcripts:download_revision", args=[session.pk, 0]) in html


def test_it_rejects_post(alice_client, session):
    assert alice_client.post(session.get_absolute_url()).status_code == 405
