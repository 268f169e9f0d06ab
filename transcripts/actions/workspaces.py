"""Workspaces: creating one, its members and invitations, its own policies."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from transcripts.actions.common import EventType, audit
from transcripts.core.policy import custom
from transcripts.invitations import (
    CREATOR_GONE,
    SECRET_BYTES,
    AlreadyMember,
    InvitationClosed,
    creator_is_admin,
)
from transcripts.models import Invitation, Membership, Workspace, WorkspacePolicy, hash_token

logger = logging.getLogger(__name__)


class LastAdmin(Exception):
    """The change would leave a workspace without an admin."""


def do_create_workspace(name: str, *, acting_user: Any) -> Workspace:
    """Create the workspace `name`, owned by `acting_user` unless that is None (the CLI)."""
    with transaction.atomic(durable=True):
        workspace = Workspace.objects.create(name=name)
        audit(
            EventType.WORKSPACE_CREATED,
            workspace_id=workspace.pk,
            acting_user=acting_user,
            extra_data={"name": name},
        )
        if acting_user is not None:
            Membership.objects.create(
                user=acting_user, workspace=workspace, role=Membership.Role.ADMIN
            )
            audit_member(workspace.pk, acting_user, None, Membership.Role.ADMIN, acting_user)
    return workspace


def audit_member(
    workspace_id: int, user: Any, before: str | None, after: str | None, acting_user: Any
) -> None:
    """Audit `user`'s role in workspace `workspace_id` going from `before` to `after`.

    None for `before` or `after`: not a member. Nothing when the role is unchanged.
    Shared by the actions here and the admin's membership forms.
    """
    if before == after:
        return
    event = (
        EventType.MEMBER_ADDED
        if before is None
        else EventType.MEMBER_REMOVED
        if after is None
        else EventType.MEMBER_ROLE_CHANGED
    )
    audit(
        event,
        workspace_id=workspace_id,
        acting_user=acting_user,
        extra_data={"user": user.get_username(), "role_before": before, "role_after": after},
    )


def do_add_member(workspace: Workspace, user: Any, *, role: str, acting_user: Any) -> Membership:
    """Make `user` a member of `workspace` with `role`; an existing membership keeps its role."""
    with transaction.atomic(durable=True):
        membership, created = Membership.objects.get_or_create(
            user=user, workspace=workspace, defaults={"role": role}
        )
        if created:
            audit_member(workspace.pk, user, None, role, acting_user)
    return membership


def do_set_member_role(
    workspace: Workspace, user: Any, role: str | None, *, acting_user: Any
) -> Membership | None:
    """Give `user` `role` in `workspace` (adding them if needed); None removes them.

    Raises LastAdmin rather than leave the workspace with no admin. The rows
    are locked, so two admins demoting each other at once cannot both succeed.
    """
    with transaction.atomic(durable=True):
        admins = list(
            Membership.objects.select_for_update()
            .filter(workspace=workspace, role=Membership.Role.ADMIN)
            .values_list("user_id", flat=True)
        )
        if admins == [user.pk] and role != Membership.Role.ADMIN:
            raise LastAdmin(
                f"{user} is the only admin of {workspace}: make someone else admin first"
            )
        before = (
            Membership.objects.filter(workspace=workspace, user=user)
            .values_list("role", flat=True)
            .first()
        )
        if role is None:
            Membership.objects.filter(workspace=workspace, user=user).delete()
            membership = None
        else:
            membership, _ = Membership.objects.update_or_create(
                user=user, workspace=workspace, defaults={"role": role}
            )
        audit_member(workspace.pk, user, before, role, acting_user)
    return membership


# Invitations: see transcripts.invitations.


def do_create_invitation(
    workspace: Workspace, role: str, *, acting_user: Any
) -> tuple[Invitation, str]:
    """Make an invitation to `workspace` as `role`, open for settings.INVITATION_DAYS.

    Return it and its secret, which is stored only hashed: show it once.
    """
    secret = secrets.token_urlsafe(SECRET_BYTES)
    with transaction.atomic(durable=True):
        invitation = Invitation.objects.create(
            workspace=workspace,
            role=role,
            hashed_key=hash_token(secret),
            created_by=acting_user,
            expires=timezone.now() + timedelta(days=settings.INVITATION_DAYS),
        )
        audit(
            EventType.INVITATION_CREATED,
            workspace_id=workspace.pk,
            acting_user=acting_user,
            extra_data={"invitation": invitation.pk, "role": role},
        )
    return invitation, secret


def do_accept_invitation(invitation: Invitation, *, acting_user: Any) -> Membership:
    """Make `acting_user` a member of the invitation's workspace with its role, once.

    Raises InvitationClosed if it was used, revoked or has expired (checked
    under a row lock, so two people cannot both use one link) or if its
    creator is no longer an admin of the workspace (`creator_is_admin`), and
    AlreadyMember, leaving the invitation open, if the user is a member.
    """
    with transaction.atomic(durable=True):
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if not locked.is_open():
            raise InvitationClosed("This invitation was used, revoked or has expired.")
        if not creator_is_admin(locked):
            raise InvitationClosed(CREATOR_GONE.format(workspace=invitation.workspace))
        existing = Membership.objects.filter(
            user=acting_user, workspace_id=locked.workspace_id
        ).first()
        if existing is not None:
            raise AlreadyMember(
                f"You are a member of {invitation.workspace} already "
                f"({existing.get_role_display().lower()})."
            )
        membership = Membership.objects.create(
            user=acting_user, workspace_id=locked.workspace_id, role=locked.role
        )
        locked.accepted_by = acting_user
        locked.accepted_at = timezone.now()
        locked.save(update_fields=["accepted_by", "accepted_at"])
        audit(
            EventType.INVITATION_ACCEPTED,
            workspace_id=locked.workspace_id,
            acting_user=acting_user,
            on_behalf_of=locked.created_by,
            extra_data={"invitation": locked.pk, "role": locked.role},
        )
    return membership


def do_revoke_invitation(invitation: Invitation, *, acting_user: Any) -> bool:
    """Revoke an open invitation; return False if it was not open any more."""
    with transaction.atomic(durable=True):
        revoked = (
            Invitation.objects.filter(
                pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True
            ).update(revoked_at=timezone.now())
            == 1
        )
        if revoked:
            audit(
                EventType.INVITATION_REVOKED,
                workspace_id=invitation.workspace_id,
                acting_user=acting_user,
                extra_data={"invitation": invitation.pk, "role": invitation.role},
            )
    return revoked


# Policies.


def do_save_workspace_policy(
    workspace: Workspace,
    name: str,
    table: dict[str, str],
    synthetic_text: str,
    description: str,
    *,
    instance: WorkspacePolicy | None = None,
    acting_user: Any,
) -> WorkspacePolicy:
    """Create (or, given `instance`, change) a workspace policy, validated by the core.

    Raises ValueError with the refused rows when a kind cannot take its
    action, IntegrityError when the workspace has a policy of that name.
    """
    custom(name, table, synthetic_text or None, description)
    with transaction.atomic(durable=True):
        row = instance or WorkspacePolicy(workspace=workspace)
        before = None if instance is None else {"name": row.name, "actions": row.actions}
        row.workspace, row.name, row.actions = workspace, name, table
        row.synthetic_text, row.description = synthetic_text, description
        row.save()
        audit(
            EventType.POLICY_CREATED if instance is None else EventType.POLICY_CHANGED,
            workspace_id=workspace.pk,
            acting_user=acting_user,
            extra_data={"policy": row.pk, "name": name, "actions": table, "before": before},
        )
    return row


def do_delete_workspace_policy(policy: WorkspacePolicy, *, acting_user: Any) -> None:
    """Delete the workspace policy `policy`; the audit keeps its name and table."""
    with transaction.atomic(durable=True):
        audit(
            EventType.POLICY_DELETED,
            workspace_id=policy.workspace_id,
            acting_user=acting_user,
            extra_data={"policy": policy.pk, "name": policy.name, "actions": policy.actions},
        )
        policy.delete()
