import re

import pytest

from transcripts.models import WorkspacePolicy

pytestmark = pytest.mark.django_db


def _form(workspace, **rows):
    data = {"workspace": workspace.pk, "name": "mine", "synthetic_text": "", "description": ""}
    data.update({f"kind_{kind}": action for kind, action in rows.items()})
    return data


def test_it_creates_a_policy_from_the_form(alice_client, workspace):
    response = alice_client.post("/policies/", _form(workspace, missing_result="drop"))
    assert response.status_code == 302
    row = WorkspacePolicy.objects.get()
    assert (row.workspace, row.name, row.actions) == (workspace, "mine", {"missing_result": "drop"})
    page = alice_client.get("/policies/").content.decode()
    assert "missing_result → drop" in page


def test_it_refuses_a_row_with_a_message(alice_client, workspace):
    response = alice_client.post("/policies/", _form(workspace, duplicate_result="synthesize"))
    assert response.status_code == 400
    assert "duplicate_result cannot take the action synthesize; it can take" in (
        response.content.decode()
    )
    assert not WorkspacePolicy.objects.exists()


def test_the_session_page_offers_the_workspace_policy(alice_client, workspace, ingest):
    from tests.helpers import sample

    WorkspacePolicy.objects.create(
        workspace=workspace, name="mine", actions={"missing_result": "drop"}
    )
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    page = alice_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "mine (workspace policy)" in page
    assert "the agent&#x27;s own interruption text in its own session files" in page
    shown = alice_client.get(f"/sessions/{session.pk}/?policy=mine")
    assert shown.status_code == 200
    assert "under <b>mine</b>" in shown.content.decode()


def test_an_edit_cannot_move_a_policy_to_another_workspace(
    alice_client, workspace, other_workspace, membership
):
    membership.role = "editor"
    membership.save()
    row = WorkspacePolicy.objects.create(
        workspace=workspace, name="mine", actions={"missing_result": "drop"}
    )
    response = alice_client.post(
        f"/policies/{row.pk}/", _form(other_workspace, missing_result="synthesize")
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.workspace, row.actions) == (workspace, {"missing_result": "synthesize"})
    assert not other_workspace.policies.exists()


def test_each_kinds_menu_offers_only_the_actions_it_can_take(alice_client):
    page = alice_client.get("/policies/").content.decode()
    menu = re.search(r'<select name="kind_orphaned_result"[^>]*>(.*?)</select>', page, re.S)
    assert menu is not None
    offered = re.findall(r'<option value="([^"]*)"', menu.group(1))
    assert offered == ["", "drop", "keep"]  # flag is the empty choice
    menu = re.search(r'<select name="kind_missing_result"[^>]*>(.*?)</select>', page, re.S)
    assert menu is not None
    assert set(re.findall(r'<option value="([^"]*)"', menu.group(1))) == {
        "",
        "synthesize",
        "drop",
        "keep",
    }
