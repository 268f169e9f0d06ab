import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.api.conftest import client_for, error_of
from transcripts import actions
from transcripts.models import ApiToken

URL = "/api/sessions"
pytestmark = pytest.mark.django_db


def test_it_requires_a_token():
    response = APIClient().get(URL)
    assert error_of(response) == (401, "not_authenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    # The message says what to send, and where a token is made.
    assert "Authorization: Bearer <token>" in response.json()["error"]["message"]
    assert "/tokens/" in response.json()["error"]["message"]


def test_a_path_with_a_final_slash_is_pointed_at_the_operation_without_it():
    message = APIClient().get("/api/schema/").json()["error"]["message"]
    assert message == (
        "There is no API operation at /api/schema/. The API's paths end without a slash: "
        "/api/schema."
    )
    other = APIClient().get("/api/nothing/").json()["error"]["message"]
    assert other == "There is no API operation at /api/nothing/."


@pytest.mark.parametrize(
    "header",
    [
        "Bearer nope",
        "Bearer pfx_00000000_" + "a" * 43,
        "Bearer",
        "Bearer two words",
    ],
)
def test_it_refuses_a_bad_token(secret, header):
    response = APIClient().get(URL, HTTP_AUTHORIZATION=header)
    assert error_of(response) == (401, "invalid_token")


def test_it_refuses_a_token_with_the_right_prefix_and_a_wrong_secret(secret):
    forged = secret[: ApiToken.PREFIX_LENGTH + 1] + ("A" if secret[-1] != "A" else "B") * 43
    assert error_of(client_for(forged).get(URL)) == (401, "invalid_token")


def test_it_refuses_a_revoked_token(alice, secret):
    token = ApiToken.objects.get()
    assert actions.do_revoke_api_token(token, acting_user=alice) is True
    assert error_of(client_for(secret).get(URL)) == (401, "invalid_token")
    assert actions.do_revoke_api_token(token, acting_user=alice) is False


def test_it_stores_only_a_hash_of_the_secret(secret, workspace, alice):
    token = ApiToken.objects.get()
    assert secret.startswith(token.prefix)
    assert token.prefix.startswith("pfx_") and len(token.prefix) == 12
    assert len(secret) == ApiToken.TOKEN_LENGTH
    assert token.hashed_key == hashlib.sha256(secret.encode()).hexdigest()
    assert secret[ApiToken.PREFIX_LENGTH :] not in str(ApiToken.objects.values_list().get())
    assert (token.workspace, token.created_by, token.name) == (workspace, alice, "runtime")


def test_it_records_when_a_token_was_last_used(api):
    assert ApiToken.objects.get().last_used is None
    before = timezone.now()
    assert api.get(URL).status_code == 200
    used = ApiToken.objects.get().last_used
    assert used is not None and used >= before


def test_it_writes_last_used_at_most_once_a_minute(secret):
    token = ApiToken.objects.get()
    start = timezone.now()
    actions.do_mark_token_used(token, now=start)
    actions.do_mark_token_used(ApiToken.objects.get(), now=start + timedelta(seconds=30))
    assert ApiToken.objects.get().last_used == start
    later = start + timedelta(seconds=61)
    actions.do_mark_token_used(ApiToken.objects.get(), now=later)
    assert ApiToken.objects.get().last_used == later


def test_a_token_sees_only_its_own_workspace(
    api, other_api, ingest, workspace, other_workspace, bob
):
    mine = ingest(workspace, "mine.jsonl", b"{}\n")
    theirs = ingest(other_workspace, "theirs.jsonl", b"{}\n", user=bob)
    assert [s["id"] for s in api.get(URL).json()["results"]] == [mine.pk]
    assert [s["id"] for s in other_api.get(URL).json()["results"]] == [theirs.pk]
    assert error_of(api.get(f"/api/sessions/{theirs.pk}")) == (404, "not_found")
    assert error_of(api.get(f"/api/sessions/{theirs.pk}/revisions/0/content")) == (
        404,
        "not_found",
    )
