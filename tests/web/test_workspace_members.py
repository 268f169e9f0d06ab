import pytest

from transcripts.models import Membership

pytestmark = pytest.mark.django_db


def url(workspace):
    return f"/workspaces/{workspace.pk}/members/"


def test_an_admin_adds_changes_and_removes_a_member(alice_client, workspace, bob):
    assert (
        alice_client.post(url(workspace), {"username": "bob", "role": "viewer"}).status_code == 302
    )
    assert workspace.memberships.get(user=bob).role == "viewer"

    alice_client.post(url(workspace), {"username": "bob", "role": "editor"})
    assert workspace.memberships.get(user=bob).role == "editor"

    alice_client.post(url(workspace), {"username": "bob", "role": "remove"})
    assert not workspace.memberships.filter(user=bob).exists()


def test_the_last_admin_cannot_step_down(alice_client, workspace, alice):
    response = alice_client.post(url(workspace), {"username": "alice", "role": "editor"})
    assert response.status_code == 400
    assert "alice is the only admin of Alpha" in response.content.decode()
    assert workspace.memberships.get(user=alice).role == "admin"


def test_an_unknown_user_is_a_form_error(alice_client, workspace):
    response = alice_client.post(url(workspace), {"username": "nobody", "role": "viewer"})
    assert response.status_code == 400
    assert "No user named &#x27;nobody&#x27;." in response.content.decode()


def test_an_editor_sees_the_members_but_cannot_change_them(client, alice, bob, workspace):
    Membership.objects.create(user=bob, workspace=workspace, role="editor")
    client.force_login(bob)

    page = client.get(url(workspace)).content.decode()
    assert "alice" in page and "Add a member" not in page
    assert client.post(url(workspace), {"username": "bob", "role": "admin"}).status_code == 403
    assert workspace.memberships.get(user=bob).role == "editor"


def test_another_workspace_is_not_found(alice_client, other_workspace):
    assert alice_client.get(url(other_workspace)).status_code == 404


def test_the_workspace_list_shows_each_role(alice_client, workspace, membership):
    page = alice_client.get("/workspaces/").content.decode()
    assert "Alpha" in page and "Beta" in page
    assert "<td>Admin</td>" in page and "<td>Viewer</td>" in page
