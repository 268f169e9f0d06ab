"""Token authentication: `Authorization: Bearer <token>`, a workspace's API token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from transcripts import actions
from transcripts.models import ApiToken


class TokenAuthentication(authentication.BaseAuthentication):
    """Authenticate a request by a workspace's API token.

    The request's user is the token's creator (anonymous if that user is
    gone) and `request.auth` the ApiToken. No header: not authenticated
    (401); a malformed, unknown or revoked token: 401 `invalid_token`.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "The Authorization header must be “Bearer <token>”."
            )
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError:
            secret = ""
        token = ApiToken.objects.authenticate(secret)
        if token is None:
            raise exceptions.AuthenticationFailed("The API token is not valid or was revoked.")
        actions.do_mark_token_used(token)
        return token.created_by or AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Describe TokenAuthentication in the OpenAPI schema as HTTP bearer authentication."""

    target_class = TokenAuthentication
    name = "token"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A workspace's API token, created on the workspace's API tokens page.",
        }
