"""Invitations: the only way a user becomes a member of a workspace they did not create.

A workspace admin makes an invitation for a role and passes its link on;
the invited user, logged in, opens it and accepts. Nobody is added without
accepting, and nothing an admin types reveals whether a username exists.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from transcripts.models import Invitation, Membership, Workspace, hash_token

logger = logging.getLogger(__name__)

SECRET_BYTES = 32


class InvitationClosed(Exception):
    """The invitation was used, revoked or has expired."""


CREATOR_GONE = (
    "This invitation was made by someone who is no longer an admin of {workspace}: "
    "ask a current admin for a new one."
)


class AlreadyMember(Exception):
    """The user accepting an invitation is a member of its workspace already."""


def creator_is_admin(invitation: Invitation) -> bool:
    """Return True if whoever made `invitation` is still an admin of its workspace.

    An invitation speaks for its creator: once they are removed or demoted
    (or their account deleted), it no longer admits anyone.
    """
    return invitation.created_by_id is not None and Membership.has_role(
        invitation.created_by_id, invitation.workspace_id, Membership.Role.ADMIN
    )


def find_open(secret: str) -> Invitation | None:
    """Return the open invitation whose secret is `secret`, or None."""
    invitation = (
        Invitation.objects.select_related("workspace", "created_by")
        .filter(hashed_key=hash_token(secret))
        .first()
    )
    return invitation if invitation is not None and invitation.is_open() else None


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
    logger.info(
        "invitation created",
        extra={"workspace": workspace.pk, "invitation": invitation.pk, "by": acting_user.pk},
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
    logger.info(
        "invitation accepted",
        extra={"workspace": locked.workspace_id, "invitation": locked.pk, "user": acting_user.pk},
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
        logger.info("invitation revoked", extra={"invitation": invitation.pk, "by": acting_user.pk})
    return revoked
