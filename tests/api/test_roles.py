"""A token has the role its creator holds in the workspace now."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.api.conftest import client_for, error_of
from tests.helpers import sample
from tests.sync.conftest import call, user
from transcripts import actions
from transcripts.models import Job, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol(django_user_model, workspace):
    carol = django_user_model.objects.create_user("carol", password="carol-password")
    Membership.objects.create(user=carol, workspace=workspace, role=Membership.Role.VIEWER)
    return carol


@pytest.fixture
def viewer_api(carol, workspace):
    """Return a client with a token that carol, a viewer of alice's workspace, created."""
    _, secret = actions.do_create_api_token(workspace, "reader", acting_user=carol)
    return client_for(secret)


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "agent.jsonl", user("u1", None, "hi") + call("a1", "u1", "t1"))


def test_a_viewers_token_reads(viewer_api, session):
    assert viewer_api.get("/api/sessions").json()["count"] == 1
    assert viewer_api.get(f"/api/sessions/{session.pk}/faults").status_code == 200
    content = viewer_api.get(f"/api/sessions/{session.pk}/revisions/0/content")
    assert b"".join(content.streaming_content) == session.head.read()


def test_a_viewers_token_writes_nothing(viewer_api, session):
    url = f"/api/sessions/{session.pk}"
    file = SimpleUploadedFile("chat.json", sample("formats/openai_chat.json"))
    upload = viewer_api.post("/api/sessions", {"file": file}, format="multipart")
    responses = [
        upload,
        viewer_api.post(f"{url}/records", b'{"a":1}\n', content_type="application/x-ndjson"),
        viewer_api.post(f"{url}/repair", {}, format="json"),
        viewer_api.post("/api/jobs", {"kind": "repair"}, format="json"),
        viewer_api.post("/api/jobs", {"kind": "dry_run"}, format="json"),
    ]
    for response in responses:
        assert error_of(response) == (403, "permission_denied")
    assert "needs the editor role" in responses[1].json()["error"]["message"]
    assert session.revisions.count() == 1
    assert Job.objects.count() == 0


def test_a_viewers_token_may_export(viewer_api, carol, session):
    response = viewer_api.post("/api/jobs", {"kind": "export"}, format="json")
    assert response.status_code == 202
    assert Job.objects.get().created_by == carol


def test_a_token_follows_its_creators_role(viewer_api, carol, workspace, alice, session):
    actions.do_set_member_role(workspace, carol, Membership.Role.EDITOR, acting_user=alice)
    assert (
        viewer_api.post(f"/api/sessions/{session.pk}/repair", {}, format="json").status_code == 202
    )

    actions.do_set_member_role(workspace, carol, None, acting_user=alice)
    response = viewer_api.get("/api/sessions")
    assert error_of(response) == (403, "permission_denied")
    assert "no longer a member" in response.json()["error"]["message"]


def test_a_token_whose_creator_is_gone_is_refused(viewer_api, carol):
    carol.delete()
    assert error_of(viewer_api.get("/api/sessions")) == (403, "permission_denied")
