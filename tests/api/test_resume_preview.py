"""GET /api/sessions/{id}/resume-preview: what the agent sends on resume, raw and repaired."""

import pytest

from tests.api.conftest import error_of
from tests.helpers import ORPHANED_CALL, sample

pytestmark = pytest.mark.django_db


def _calls(side):
    return [c for m in side["messages"] for c in m["calls"]]


def _results(side):
    return [r for m in side["messages"] for r in m["results"]]


def test_it_shows_claude_code_dropping_the_orphaned_call_and_the_repair_keeping_it(
    api, workspace, ingest
):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    response = api.get(f"/api/sessions/{session.pk}/resume-preview")
    assert response.status_code == 200
    body = response.json()
    assert (body["agent"], body["provider"], body["policy"]) == (
        "Claude Code",
        "anthropic",
        "synthesize",
    )
    assert body["revision"] == 0
    assert body["modelled_on"] == "@anthropic-ai/claude-code 2.1.328"
    raw, repaired = body["raw"], body["repaired"]
    assert raw["valid"] and repaired["valid"]
    assert ORPHANED_CALL not in _calls(raw)
    assert [(d["what"], d["tool_call_id"]) for d in raw["dropped"]] == [("call", ORPHANED_CALL)]
    assert ORPHANED_CALL in _calls(repaired) and ORPHANED_CALL in _results(repaired)
    assert repaired["dropped"] == []
    assert raw["added"] == [
        {"role": "assistant", "texts": ["No response requested."], "calls": [], "results": []}
    ]
    assert raw["messages"][0] == {
        "role": "user",
        "texts": ["Run the unit tests and show me failures."],
        "calls": [],
        "results": [],
    }


def test_it_shows_codex_writing_aborted_for_the_unanswered_call(api, workspace, ingest):
    session = ingest(workspace, "rollout.jsonl", sample("formats/codex_rollout.jsonl"))
    body = api.get(f"/api/sessions/{session.pk}/resume-preview?policy=native").json()
    assert (body["agent"], body["provider"], body["policy"]) == (
        "Codex",
        "openai_responses",
        "native",
    )
    call = "call_CCCCCCCCCCCCCCCCCCCCCC02"
    assert [m["results"] for m in body["raw"]["added"]] == [[call]]
    assert body["repaired"]["added"] == []
    assert _results(body["raw"]).count(call) == _results(body["repaired"]).count(call) == 1


def test_it_refuses_a_format_no_agent_resumes(api, workspace, ingest):
    session = ingest(workspace, "messages.json", sample("formats/anthropic_messages.json"))
    response = api.get(f"/api/sessions/{session.pk}/resume-preview")
    assert error_of(response) == (404, "no_preview")


def test_it_rejects_an_unknown_policy(api, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    response = api.get(f"/api/sessions/{session.pk}/resume-preview?policy=shred")
    # A policy is a preset or a row of the workspace: one it lacks is not found.
    assert error_of(response) == (404, "not_found")
    assert "There is no policy “shred” in this workspace" in response.json()["error"]["message"]


def test_it_hides_other_workspaces_sessions(other_api, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    assert error_of(other_api.get(f"/api/sessions/{session.pk}/resume-preview")) == (
        404,
        "not_found",
    )
