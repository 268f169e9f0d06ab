"""The resume preview page: what the agent sends on resuming the file, raw and repaired."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.helpers import SAMPLES

pytestmark = pytest.mark.django_db


def _claude_code_session() -> bytes:
    """Return a Claude Code file whose first tool_use lost its result mid-history."""

    def line(uuid: str, parent: str | None, message: dict[str, object], kind: str) -> str:
        return json.dumps(
            {
                "type": kind,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": "s1",
                "cwd": "/w",
                "message": message,
                "timestamp": "2026-01-01T00:00:00Z",
            }
        )

    call = {"type": "tool_use", "id": "toolu_A", "name": "Bash", "input": {"command": "ls"}}
    lines = [
        line("u1", None, {"role": "user", "content": "list files <script>x()</script>"}, "user"),
        line("a1", "u1", {"id": "m1", "role": "assistant", "content": [call]}, "assistant"),
        line("u2", "a1", {"role": "user", "content": "why did you stop?"}, "user"),
        line(
            "a2",
            "u2",
            {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Sorry."}]},
            "assistant",
        ),
    ]
    return "".join(f"{text}\n" for text in lines).encode()


def test_it_says_what_claude_code_drops_and_that_the_repair_keeps_it(
    alice_client, workspace, ingest
):
    session = ingest(workspace, "s1.jsonl", _claude_code_session())
    url = reverse("transcripts:resume_preview", args=[session.pk])
    page = alice_client.get(url, {"policy": "synthesize"})
    html = page.content.decode()
    assert page.status_code == 200
    # Claude Code drops an unanswered tool_use when it loads the file (the agent tier
    # checks this against the real CLI); the repair answers it, so it is sent.
    assert "Claude Code would silently drop 1 tool call of this file on resume" in html
    assert "the repair under synthesize keeps them" in html
    assert "Modelled on @anthropic-ai/claude-code 2.1.328, whose loader" in html
    assert "record 1: call <code>toolu_A</code>" in html
    assert html.count("calls <code>toolu_A</code>") == 1  # only on the repaired side
    assert "answers <code>toolu_A</code>" in html
    assert "<script>x()</script>" not in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html
    assert page["Cache-Control"].startswith("private") or "no-store" in page["Cache-Control"]


def test_the_session_page_links_to_it(alice_client, workspace, ingest):
    session = ingest(workspace, "s1.jsonl", _claude_code_session())
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert reverse("transcripts:resume_preview", args=[session.pk]) in html


def test_a_plain_message_list_has_no_agent_to_model(alice_client, workspace, ingest):
    data = (SAMPLES / "formats" / "openai_chat.json").read_bytes()
    session = ingest(workspace, "chat.json", data)
    page = alice_client.get(reverse("transcripts:resume_preview", args=[session.pk]))
    assert page.status_code == 200
    assert "No agent resumes OpenAI Chat" in page.content.decode()


def test_another_workspaces_session_is_not_found(alice_client, other_workspace, ingest, bob):
    session = ingest(other_workspace, "s1.jsonl", _claude_code_session(), user=bob)
    page = alice_client.get(reverse("transcripts:resume_preview", args=[session.pk]))
    assert page.status_code == 404


def test_an_unknown_policy_is_refused(alice_client, workspace, ingest):
    session = ingest(workspace, "s1.jsonl", _claude_code_session())
    page = alice_client.get(
        reverse("transcripts:resume_preview", args=[session.pk]), {"policy": "nope"}
    )
    assert page.status_code == 400
