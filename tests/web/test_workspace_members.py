import re
from datetime import timedelta

import pytest
from django.utils import timezone

from transcripts.models import Invitation, Membership, hash_token

pytestmark = pytest.mark.django_db


def url(workspace):
    return f"/workspaces/{workspace.pk}/members/"


def invite_url(workspace):
    return f"/workspaces/{workspace.pk}/invitations/"


def _invite(client, workspace, role="viewer"):
    """Make an invitation as the client's user; return the path of its link."""
    response = client.post(invite_url(workspace), {"role": role})
    assert response.status_code == 201
    [link] = re.findall(r'<code class="invitation-link">([^<]+)</code>', response.content.decode())
    return link.removeprefix("http://testserver")


def test_an_invited_user_joins_only_by_accepting(alice_client, client, workspace, bob):
    link = _invite(alice_client, workspace, "editor")
    invitation = Invitation.objects.get()
    # Only the secret's hash is kept, and nobody is a member yet.
    assert invitation.hashed_key == hash_token(link.rstrip("/").rsplit("/", 1)[-1])
    assert not workspace.memberships.filter(user=bob).exists()

    client.force_login(bob)
    page = client.get(link)
    assert page.status_code == 200
    html = " ".join(page.content.decode().split())
    assert "alice invites you to the workspace Alpha as editor" in html
    assert not workspace.memberships.filter(user=bob).exists()

    assert client.post(link).status_code == 302
    assert workspace.memberships.get(user=bob).role == "editor"
    invitation.refresh_from_db()
    assert (invitation.accepted_by, invitation.accepted_at is not None) == (bob, True)


def test_a_link_works_once(alice_client, client, workspace, bob, django_user_model):
    link = _invite(alice_client, workspace)
    client.force_login(bob)
    client.post(link)
    carol = django_user_model.objects.create_user("carol")
    client.force_login(carol)
    for response in (client.get(link), client.post(link)):
        assert response.status_code == 404
        assert "This invitation link was used, revoked or has expired" in (
            response.content.decode()
        )
    assert not workspace.memberships.filter(user=carol).exists()


def test_an_expired_or_revoked_link_is_refused(alice_client, client, workspace, bob):
    expired = _invite(alice_client, workspace)
    Invitation.objects.update(expires=timezone.now() - timedelta(seconds=1))
    revoked = _invite(alice_client, workspace)
    pending = Invitation.objects.get(expires__gt=timezone.now())
    response = alice_client.post(f"{invite_url(workspace)}{pending.pk}/revoke/")
    assert response.status_code == 302
    client.force_login(bob)
    for link in (expired, revoked):
        assert client.post(link).status_code == 404
    assert not workspace.memberships.filter(user=bob).exists()


def test_a_member_accepting_keeps_their_role(alice_client, workspace):
    link = _invite(alice_client, workspace, "viewer")
    alice_client.post(link)
    assert workspace.memberships.get().role == "admin"
    assert Invitation.objects.get().is_open()


def test_an_invitation_needs_a_login(alice_client, workspace):
    link = _invite(alice_client, workspace)
    alice_client.logout()
    response = alice_client.get(link)
    assert (response.status_code, response.url) == (302, f"/accounts/login/?next={link}")


def test_an_admin_changes_and_removes_a_member(alice_client, workspace, bob):
    Membership.objects.create(user=bob, workspace=workspace, role="viewer")
    alice_client.post(url(workspace), {"username": "bob", "role": "editor"})
    assert workspace.memberships.get(user=bob).role == "editor"

    alice_client.post(url(workspace), {"username": "bob", "role": "remove"})
    assert not workspace.memberships.filter(user=bob).exists()


def test_nobody_is_added_without_consent(alice_client, workspace, bob):
    response = alice_client.post(url(workspace), {"username": "bob", "role": "admin"})
    assert response.status_code == 400
    assert not workspace.memberships.filter(user=bob).exists()


def test_the_form_does_not_tell_whether_a_username_exists(alice_client, workspace, bob):
    def error(username):
        response = alice_client.post(url(workspace), {"username": username, "role": "viewer"})
        assert response.status_code == 400
        [errors] = re.findall(r'<ul class="errorlist".*?</ul>', response.content.decode())
        return errors.replace(username, "NAME")

    assert error("bob") == error("nobody")
    assert "&#x27;NAME&#x27; is not a member of Alpha. To add someone, make an invitation" in (
        error("bob")
    )


def test_the_last_admin_cannot_step_down(alice_client, workspace, alice):
    response = alice_client.post(url(workspace), {"username": "alice", "role": "editor"})
    assert response.status_code == 400
    assert "alice is the only admin of Alpha" in response.content.decode()
    assert workspace.memberships.get(user=alice).role == "admin"


def test_an_editor_sees_the_members_but_cannot_change_them(client, alice, bob, workspace):
    Membership.objects.create(user=bob, workspace=workspace, role="editor")
    client.force_login(bob)

    page = client.get(url(workspace)).content.decode()
    assert "alice" in page and "Invite a member" not in page
    assert client.post(url(workspace), {"username": "bob", "role": "admin"}).status_code == 403
    assert client.post(invite_url(workspace), {"role": "admin"}).status_code == 403
    assert workspace.memberships.get(user=bob).role == "editor"
    assert not Invitation.objects.exists()


def test_another_workspace_is_not_found(alice_client, other_workspace):
    assert alice_client.get(url(other_workspace)).status_code == 404
    assert alice_client.post(invite_url(other_workspace), {"role": "admin"}).status_code == 404


def test_the_workspace_list_shows_each_role(alice_client, workspace, membership):
    page = alice_client.get("/workspaces/").content.decode()
    assert "Alpha" in page and "Beta" in page
    assert "<td>Admin</td>" in page and "<td>Viewer</td>" in page


@pytest.mark.parametrize("change", ["demoted", "removed"])
def test_a_link_dies_with_its_creators_admin_role(
    alice_client, client, workspace, alice, django_user_model, change
):
    link = _invite(alice_client, workspace, "editor")
    mine = workspace.memberships.filter(user=alice)
    if change == "demoted":
        mine.update(role="viewer")
    else:
        mine.delete()
    carol = django_user_model.objects.create_user("carol")
    client.force_login(carol)
    page = client.get(link)
    assert page.status_code == 403
    refusal = "made by someone who is no longer an admin of Alpha: ask a current admin"
    assert refusal in page.content.decode()
    response = client.post(link, follow=True)
    assert refusal in response.content.decode()
    assert not workspace.memberships.filter(user=carol).exists()
    assert Invitation.objects.get().accepted_at is None
