"""Fixtures for the API tests: a token of alice's workspace and a client that sends it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from transcripts import actions
from transcripts.models import Workspace


def client_for(secret: str) -> APIClient:
    """Return an API client that sends `secret` as its bearer token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def secret(alice: Any, workspace: Workspace) -> str:
    """Return the secret of an API token of alice's workspace, created by alice."""
    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    return secret


@pytest.fixture
def api(secret: str) -> APIClient:
    """Return a client authenticated with alice's workspace's token."""
    return client_for(secret)


@pytest.fixture
def other_api(bob: Any, other_workspace: Workspace) -> APIClient:
    """Return a client authenticated with a token of bob's workspace."""
    _, secret = actions.do_create_api_token(other_workspace, "theirs", acting_user=bob)
    return client_for(secret)


def error_of(response: Any) -> tuple[int, str]:
    """Return (status, error code) of an API error response, checking its shape."""
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["message"]
    return response.status_code, body["error"]["code"]
