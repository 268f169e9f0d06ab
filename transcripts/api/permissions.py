"""What a token may see and do: the one place API permissions are decided.

A token acts as its workspace with the role its creator holds there now:
a viewer's token reads (and exports), an editor's or admin's token also
uploads, appends, repairs and runs jobs. A token whose creator has left the
workspace is refused (403). Every view takes its querysets from the helpers
here, so another workspace's rows are never found (a 404, never a 403 that
confirms they exist).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions, permissions
from rest_framework.request import Request

from transcripts.models import (
    ApiToken,
    Job,
    Membership,
    Session,
    SessionQuerySet,
    Workspace,
    roles_at_least,
)


def request_token(request: Request) -> ApiToken:
    """Return the API token the request authenticated with (TokenPermission requires one)."""
    assert isinstance(request.auth, ApiToken)
    return request.auth


def role(request: Request) -> str | None:
    """Return the role the request's token acts with: its creator's in the workspace, or None."""
    token = request_token(request)
    if token.created_by is None:
        return None
    found: str | None = (
        Membership.objects.filter(user=token.created_by, workspace_id=token.workspace_id)
        .values_list("role", flat=True)
        .first()
    )
    return found


def require(request: Request, needed: str) -> None:
    """Raise PermissionDenied (403) unless the request's token acts with at least `needed`."""
    held = role(request)
    if held is None:
        raise exceptions.PermissionDenied(
            "The token's creator is no longer a member of its workspace."
        )
    if held not in roles_at_least(needed):
        raise exceptions.PermissionDenied(
            f"This needs the {needed} role; the token's creator is a {held} of the workspace."
        )


class TokenPermission(permissions.BasePermission):
    """Allow a request made with an API token whose role allows its method.

    Reading needs a viewer; writing an editor, unless the view's
    `write_role` says otherwise (it then checks the rest itself).
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, ApiToken):
            return False
        if request.method in permissions.SAFE_METHODS:
            needed = Membership.Role.VIEWER
        else:
            needed = getattr(view, "write_role", Membership.Role.EDITOR)
        require(request, needed)
        return True


def workspace(request: Request) -> Workspace:
    """Return the workspace of the request's token."""
    return request_token(request).workspace


def acting_user(request: Request) -> Any:
    """Return the user a request acts as: the token's creator (None if that user is gone)."""
    return request_token(request).created_by


def sessions(request: Request) -> SessionQuerySet:
    """Return the sessions the request may see: those of the token's workspace."""
    return Session.objects.get_queryset().filter(workspace=workspace(request))


def jobs(request: Request) -> QuerySet[Job]:
    """Return the jobs the request may see: those of the token's workspace."""
    return Job.objects.filter(workspace=workspace(request))
