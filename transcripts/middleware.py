"""Middleware of Pairfix's own."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import patch_cache_control


def no_store(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """Mark every response `Cache-Control: private, no-store`, keeping directives it set.

    Nearly every page and download shows transcript content or what was
    learnt from it (tool output, file contents, secrets an agent printed), and
    all of it is behind a login: no shared cache may keep it, and no browser
    should leave it on disk. Static files are served before this runs
    (whitenoise) and stay cacheable.
    """

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        patch_cache_control(response, private=True, no_store=True)
        return response

    return middleware
