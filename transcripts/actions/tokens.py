"""API tokens: created, revoked, and their last use noted."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from transcripts.actions.common import EventType, audit
from transcripts.models import ApiToken, Workspace, hash_token

# How precisely a token's `last_used` is kept: a busy token writes once a minute.
TOKEN_USE_RESOLUTION = timedelta(minutes=1)


def do_create_api_token(
    workspace: Workspace, name: str, *, acting_user: Any
) -> tuple[ApiToken, str]:
    """Create an API token named `name` for `workspace`; return it and its secret.

    The secret is returned this once: only its sha256 is stored.
    """
    secret = ApiToken.generate()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(
            workspace=workspace,
            name=name,
            prefix=secret[: ApiToken.PREFIX_LENGTH],
            hashed_key=hash_token(secret),
            created_by=acting_user,
        )
        audit(
            EventType.TOKEN_CREATED,
            workspace_id=workspace.pk,
            acting_user=acting_user,
            extra_data={"token": token.pk, "name": name, "prefix": token.prefix},
        )
    return token, secret


def do_revoke_api_token(token: ApiToken, *, acting_user: Any) -> bool:
    """Revoke `token`: it no longer authenticates. Return False if it already was revoked."""
    with transaction.atomic(durable=True):
        revoked = bool(
            ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
        )
        if revoked:
            audit(
                EventType.TOKEN_REVOKED,
                workspace_id=token.workspace_id,
                acting_user=acting_user,
                extra_data={"token": token.pk, "name": token.name, "prefix": token.prefix},
            )
    return revoked


def do_mark_token_used(token: ApiToken, *, now: datetime | None = None) -> None:
    """Record that `token` was used at `now`, at most once a minute (a request need not write).

    Bookkeeping, not a change anyone made: no audit row (the log would become a request log).
    """
    now = now or timezone.now()
    if token.last_used is not None and now - token.last_used < TOKEN_USE_RESOLUTION:
        return
    with transaction.atomic(durable=True):
        ApiToken.objects.filter(
            Q(last_used__isnull=True) | Q(last_used__lt=now - TOKEN_USE_RESOLUTION), pk=token.pk
        ).update(last_used=now)
    token.last_used = now
