"""What a token may see and do: the one place API permissions are decided.

Today a token may do anything within its own workspace. Roles (viewer,
editor, admin) will tighten `TokenPermission`; every view takes its
querysets from the helpers here, so another workspace's rows are never
found (a 404, never a 403 that confirms they exist).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import permissions
from rest_framework.request import Request

from transcripts.models import ApiToken, Job, Session, Workspace


class TokenPermission(permissions.BasePermission):
    """Allow requests made with an active API token."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ApiToken)


def workspace(request: Request) -> Workspace:
    """Return the workspace of the request's token."""
    assert isinstance(request.auth, ApiToken)
    return request.auth.workspace


def acting_user(request: Request) -> Any:
    """Return the user a request acts as: the token's creator (None if that user is gone)."""
    assert isinstance(request.auth, ApiToken)
    return request.auth.created_by


def sessions(request: Request) -> QuerySet[Session]:
    """Return the sessions the request may see: those of the token's workspace."""
    return Session.objects.filter(workspace=workspace(request))


def jobs(request: Request) -> QuerySet[Job]:
    """Return the jobs the request may see: those of the token's workspace."""
    return Job.objects.filter(workspace=workspace(request))
