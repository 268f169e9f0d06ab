"""API views that refuse what they do not read: a query parameter, or a body where none is taken.

A mistyped key would otherwise be dropped and the request carried out
without it: `POST /api/jobs?sessions=2` would repair every session of the
workspace, `POST /api/sessions/3/repair?dry_run=true` would repair for
real, and `?haed=0` would append without the head check. Request bodies
are held to their fields by `serializers.Strict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


class KnownQuery:
    """Refuse, with a 400 naming each, the query parameters the request's method does not take.

    `query_keys` maps an HTTP method to the parameters it reads (HEAD as
    GET); a method not listed takes none. The parameters are those the
    operation's schema documents (`tests/api/test_strict.py` holds the two
    to each other). Checked after authentication and permissions, so a
    caller with no access learns nothing of the parameters.
    """

    query_keys: ClassVar[Mapping[str, frozenset[str]]] = {}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method == "OPTIONS" or not hasattr(self, (request.method or "").lower()):
            # A preflight asks of the URL as it will be sent; a method the view has no
            # handler for gets its 405.
            return
        method = "GET" if request.method == "HEAD" else request.method
        allowed = self.query_keys.get(method or "", frozenset())
        unknown = sorted(key for key in request.query_params if key not in allowed)
        if unknown:
            takes = ", ".join(sorted(allowed)) if allowed else "none"
            raise ValidationError(
                {
                    key: [f"Unknown query parameter; this operation takes {takes}."]
                    for key in unknown
                }
            )


def refuse_body(request: Request) -> None:
    """Raise a 400 when a request that takes no body sent one with keys (or any bytes).

    Raises ValidationError naming the keys.
    """
    data = request.data
    if isinstance(data, Mapping) and data:
        raise ValidationError({str(key): ["This operation takes no body."] for key in data})
    if data and not isinstance(data, Mapping):
        raise ValidationError({"body": ["This operation takes no body."]})
