"""Secrets that travel in URLs, kept out of the logs.

An invitation link (`/accounts/invitations/<secret>/`) and a password-reset
link (`/accounts/reset/<uidb64>/<token>/`) carry their secret in the path.
django-structlog logs every request's path (`request_finished`), Django logs
a 404's path (`django.request`), and the login page's `next=` repeats the
path it was sent from: whoever reads the logs could take an invitation
still open. Every string value of a log event has these secrets replaced.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

REDACTED = "[redacted]"

# The secret segment after "invitations/" or after "reset/<uidb64>/", a "/" written
# as is or percent-encoded once or twice (a `next=` parameter, or one within one); not
# Django's "set-password" step, nor a number (an invitation's id, as in
# .../invitations/7/revoke/). Whatever the secret runs into (an encoded quote, say)
# is redacted with it.
_SLASH = r"(?:/|%2F|%252F)"
_SECRET = re.compile(
    rf"(?P<lead>invitations{_SLASH}|reset{_SLASH}[^/%?&#\s]+{_SLASH})"
    rf"(?!set-password\b)(?![0-9]+(?:{_SLASH}|$))(?P<secret>[^/?&#\s\"']+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """Return `text` with every invitation secret and password-reset token replaced."""
    folded = text.lower()
    if "invitations" not in folded and "reset" not in folded:
        return text
    return _SECRET.sub(lambda m: m.group("lead") + REDACTED, text)


def redact_secrets(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: `redact` every string value of `event_dict`."""
    for key, value in event_dict.items():
        if isinstance(value, str):
            event_dict[key] = redact(value)
    return event_dict
