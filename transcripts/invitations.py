"""Invitations: the only way a user becomes a member of a workspace they did not create.

A workspace admin makes an invitation for a role and passes its link on;
the invited user, logged in, opens it and accepts. Nobody is added without
accepting, and nothing an admin types reveals whether a username exists. The
writes (create, accept, revoke) are actions: `transcripts.actions.workspaces`.
"""

from __future__ import annotations

import logging

from transcripts.models import Invitation, Membership, hash_token

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
