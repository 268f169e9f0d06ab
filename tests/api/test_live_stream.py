"""An agent runtime streams a session through the API while it runs.

A call is pending while in flight, answered when its result arrives, and
missing once the grace period passes without one; a repair then answers it.
"""

import time
from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.helpers import run_inline
from tests.sync.conftest import call, reply, result, user
from transcripts.models import Job

pytestmark = pytest.mark.django_db

GRACE = 3  # seconds: short, yet long enough for the steps between two appends


def wait_until(moment: str) -> None:
    """Sleep until just past `moment` (an API timestamp)."""
    deadline = datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    time.sleep(max(0.0, deadline - time.time()) + 0.1)


def test_a_streamed_session_is_pending_then_answered_then_missing(api, settings):
    settings.LIVE_GRACE = GRACE
    prompt = user("u1", None, "list the files")
    created = api.post(
        "/api/sessions",
        {"file": SimpleUploadedFile("agent.jsonl", prompt), "live": "true"},
        format="multipart",
    ).json()
    url = f"/api/sessions/{created['id']}"
    assert (created["live"], created["fault_counts"]) == (True, {})

    def append(data: bytes) -> dict:
        response = api.post(f"{url}/records", data, content_type="application/x-ndjson")
        assert response.status_code == 200
        return response.json()

    # The agent sends a tool call: in flight, so pending, not an orphan.
    assert append(call("a1", "u1", "toolu_1"))["fault_counts"] == {"pending_result": 1}
    session = api.get(url).json()
    assert (session["live"], session["fault_counts"]) == (True, {"pending_result": 1})
    [fault] = api.get(f"{url}/faults").json()["faults"]
    assert (fault["kind"], fault["tool_call_id"]) == ("pending_result", "toolu_1")

    # Its result arrives: answered.
    answered = append(result("u2", "a1", "toolu_1") + reply("a2", "u2"))
    assert (answered["head"], answered["fault_counts"]) == (2, {})
    assert api.get(f"{url}/faults").json()["faults"] == []

    # Another call, and then the runtime dies: nothing more is written.
    last = append(user("u3", "a2", "and the tests?") + call("a3", "u3", "toolu_2"))
    assert last["fault_counts"] == {"pending_result": 1}
    missing = api.get("/api/sessions", {"fault": "missing_result"}).json()
    assert missing["count"] == 0

    wait_until(last["live_until"])

    session = api.get(url).json()
    assert (session["live"], session["fault_counts"]) == (False, {"missing_result": 1})
    [fault] = api.get(f"{url}/faults").json()["faults"]
    assert (fault["kind"], fault["tool_call_id"]) == ("missing_result", "toolu_2")
    missing = api.get("/api/sessions", {"fault": "missing_result"}).json()
    assert [s["id"] for s in missing["results"]] == [created["id"]]

    # No longer live, it is repaired like any other session: the call gets a synthetic result.
    job = api.post(f"{url}/repair", {}, format="json").json()
    assert run_inline(Job.objects.get(pk=job["id"])).done == 1
    repaired = api.get(url).json()
    # Answered in Claude Code's own interrupt text: nothing is left to report.
    assert (repaired["head"], repaired["fault_counts"]) == (4, {})


def test_a_session_is_expired_for_the_list_before_it_is_filtered(api, workspace, ingest, settings):
    settings.LIVE_GRACE = GRACE
    session = api.post(
        "/api/sessions",
        {
            "file": SimpleUploadedFile(
                "agent.jsonl", user("u1", None, "hi") + call("a1", "u1", "t1")
            ),
            "live": "true",
        },
        format="multipart",
    ).json()
    assert session["fault_counts"] == {"pending_result": 1}
    pending = api.get("/api/sessions", {"fault": "pending_result"}).json()
    assert [s["id"] for s in pending["results"]] == [session["id"]]

    wait_until(session["live_until"])

    assert api.get("/api/sessions", {"fault": "pending_result"}).json()["count"] == 0
    [listed] = api.get("/api/sessions", {"fault": "missing_result"}).json()["results"]
    assert (listed["id"], listed["live"]) == (session["id"], False)
