import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from transcripts import actions
from transcripts.models import ApiToken, Membership

URL = reverse("transcripts:api_tokens")
CREATE = reverse("transcripts:create_api_token")
pytestmark = pytest.mark.django_db


def test_it_requires_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_it_lists_the_tokens_of_the_users_workspaces(
    alice_client, alice, workspace, other_workspace, bob
):
    mine, _ = actions.do_create_api_token(workspace, "ci runner", acting_user=alice)
    theirs, _ = actions.do_create_api_token(other_workspace, "bobs bot", acting_user=bob)
    page = alice_client.get(URL).content.decode()
    assert "ci runner" in page
    assert f"{mine.prefix}…" in page
    assert "bobs bot" not in page and theirs.prefix not in page


def test_it_creates_a_token_and_shows_its_secret_once(alice_client, alice, workspace):
    response = alice_client.post(CREATE, {"workspace": workspace.pk, "name": "agent"})
    # POST, redirect, GET: a reload of the page showing the secret creates nothing.
    assert response.status_code == 302 and response["Location"] == URL
    token = ApiToken.objects.get()
    response = alice_client.get(URL)
    page = response.content.decode()
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"].split(", ")
    [secret] = re.findall(r'<code class="token-secret">([^<]+)</code>', page)
    assert (token.name, token.workspace, token.created_by) == ("agent", workspace, alice)
    assert secret.startswith(token.prefix)
    # It works, and the list page never shows it again.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/sessions").status_code == 200
    assert secret not in alice_client.get(URL).content.decode()


def test_it_refuses_a_workspace_the_user_is_not_in(alice_client, workspace, other_workspace):
    response = alice_client.post(CREATE, {"workspace": other_workspace.pk, "name": "sneaky"})
    assert response.status_code == 400
    assert ApiToken.objects.count() == 0


def test_it_requires_a_name(alice_client, workspace):
    response = alice_client.post(CREATE, {"workspace": workspace.pk, "name": ""})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()


def test_a_name_loses_its_bidi_and_zero_width_characters(alice_client, alice, workspace):
    alice_client.post(CREATE, {"workspace": workspace.pk, "name": "ci\u202egnp.exe\u200b"})
    assert ApiToken.objects.get().name == "cignp.exe"
    response = alice_client.post(CREATE, {"workspace": workspace.pk, "name": "\u202e\u200b"})
    assert response.status_code == 400 and "This field is required." in response.content.decode()
    # A name stored before is shown with its controls spelled out.
    actions.do_create_api_token(workspace, "old\u202ename", acting_user=alice)
    page = alice_client.get(URL).content.decode()
    assert "old[U+202E]name" in page and "\u202e" not in page


def test_it_revokes_a_token(alice_client, alice, workspace):
    token, secret = actions.do_create_api_token(workspace, "agent", acting_user=alice)
    response = alice_client.post(reverse("transcripts:revoke_api_token", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    page = alice_client.get(URL).content.decode()
    assert "revoked" in page and "Revoke agent" not in page
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/sessions").status_code == 401


def test_it_rejects_get_for_revoke(alice_client, alice, workspace):
    token, _ = actions.do_create_api_token(workspace, "agent", acting_user=alice)
    assert (
        alice_client.get(reverse("transcripts:revoke_api_token", args=[token.pk])).status_code
        == 405
    )


def test_it_hides_other_workspaces_tokens(alice_client, other_workspace, bob):
    theirs, _ = actions.do_create_api_token(other_workspace, "bobs bot", acting_user=bob)
    response = alice_client.post(reverse("transcripts:revoke_api_token", args=[theirs.pk]))
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


@pytest.fixture
def viewer_client(client, django_user_model, workspace):
    """Return a client logged in as carol, a viewer of alice's workspace."""
    carol = django_user_model.objects.create_user("carol", password="carol-password")
    Membership.objects.create(user=carol, workspace=workspace, role=Membership.Role.VIEWER)
    client.force_login(carol)
    return client


def test_a_viewer_sees_tokens_but_cannot_create_or_revoke_them(viewer_client, alice, workspace):
    token, _ = actions.do_create_api_token(workspace, "agent", acting_user=alice)
    page = viewer_client.get(URL).content.decode()
    assert "agent" in page and "Revoke agent" not in page
    assert "you administer none" in page
    response = viewer_client.post(CREATE, {"workspace": workspace.pk, "name": "mine"})
    assert response.status_code == 400
    revoke = viewer_client.post(reverse("transcripts:revoke_api_token", args=[token.pk]))
    assert revoke.status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None
    assert ApiToken.objects.count() == 1
