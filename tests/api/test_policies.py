import pytest

from tests.api.conftest import error_of
from tests.helpers import run_inline, sample
from transcripts.models import AuditRecord, Job, WorkspacePolicy

pytestmark = pytest.mark.django_db

CLAIM = "[claimed by the runtime]"


def test_it_creates_a_policy_and_a_job_repairs_under_it(api, workspace, ingest):
    body = {"name": "runtime", "actions": {"missing_result": "synthesize"}, "synthetic_text": CLAIM}
    response = api.post("/api/policies", body, format="json")
    assert response.status_code == 201
    assert response.json()["actions"] == {"missing_result": "synthesize"}
    assert WorkspacePolicy.objects.get().workspace == workspace
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    started = api.post(f"/api/sessions/{session.pk}/repair", {"policy": "runtime"}, format="json")
    assert started.status_code == 202
    run_inline(Job.objects.get())
    [record] = AuditRecord.objects.filter(op="insert_result")
    assert record.policy_row == "runtime: missing_result -> synthesize"
    assert CLAIM.encode() in session.revisions.get(number=1).read()


def test_it_refuses_an_action_a_fault_kind_cannot_take(api):
    body = {"name": "odd", "actions": {"orphaned_result": "synthesize"}}
    response = api.post("/api/policies", body, format="json")
    assert response.status_code == 400
    assert "orphaned_result cannot take the action synthesize" in str(response.json())
    assert not WorkspacePolicy.objects.exists()


def test_it_refuses_a_policy_no_one_defined(api, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    response = api.post(f"/api/sessions/{session.pk}/repair", {"policy": "nope"}, format="json")
    assert error_of(response) == (404, "not_found")
    assert "There is no policy “nope” in this workspace" in response.json()["error"]["message"]


def test_it_hides_other_workspaces_policies(api, other_workspace):
    theirs = WorkspacePolicy.objects.create(workspace=other_workspace, name="theirs", actions={})
    assert api.get("/api/policies").json() == []
    assert api.get(f"/api/policies/{theirs.pk}").status_code == 404
