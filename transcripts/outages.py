"""The page for a request that failed because a service is down: 503, naming the service.

Installed as Django's `handler500`: every uncaught exception reaches it,
including those raised by middleware before any view (a database that is
down fails the session lookup first). An error that is not an outage is
still a 500. The page is rendered without a request context: the context
processors would ask the database for the user again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import get_user
from django.db import DatabaseError, InterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.utils.functional import SimpleLazyObject
from kombu.exceptions import OperationalError as BrokerOperationalError

from transcripts.models import BlobUnreadable
from transcripts.queue import BrokerUnavailable

# What each kind of error says is down, and what that stops.
OUTAGES: list[tuple[tuple[type[BaseException], ...], str, str]] = [
    (
        (DatabaseOperationalError, InterfaceError),
        "database",
        "Pairfix cannot reach its database, so no page can be shown.",
    ),
    (
        (BrokerOperationalError, BrokerUnavailable),
        "task queue",
        "Pairfix cannot reach its task queue, so the work this page needs (building a long "
        "session's timeline, starting a job) cannot be started.",
    ),
    (
        (BlobUnreadable,),
        "file storage",
        "Pairfix cannot read or write the sessions' files in its file storage (S3), so no "
        "upload, download or timeline that needs them can be made.",
    ),
]


def storage_unreachable() -> tuple[type[Exception], ...]:
    """Return the errors that mean the S3 storage cannot be reached (`storage.UNREACHABLE`).

    Empty until `transcripts.storage` is loaded: only the S3 storage raises
    them, and settings.py loads that module to configure it. Without S3,
    botocore and django-storages (some 20 MB of a process) are not imported
    for nothing.
    """
    if "transcripts.storage" not in sys.modules:
        return ()
    from transcripts import storage

    return storage.UNREACHABLE


def storage_failing(exc: BaseException) -> bool:
    """Return True for an error that means the S3 storage is down or failing.

    That is one of `storage_unreachable`, or S3's 5xx answer
    (`storage.is_server_failing`: throttling, an internal error).
    """
    if "transcripts.storage" not in sys.modules:
        return False
    from transcripts import storage

    return isinstance(exc, storage.UNREACHABLE) or storage.is_server_failing(exc)


def storage_misconfigured(exc: BaseException | None) -> str | None:
    """Return why the S3 storage cannot work as configured, or None when `exc` does not say.

    That is S3's answer that the bucket does not exist (`storage.is_missing_bucket`):
    "file storage is misconfigured: its bucket does not exist (NoSuchBucket)".
    The bucket is not named: the words reach every member and API token,
    and the operator has the name (the configuration, the logs). The
    error's causes and contexts are looked through too.
    """
    if "transcripts.storage" not in sys.modules:
        return None
    from transcripts import storage

    while exc is not None:
        if storage.is_missing_bucket(exc):
            return "file storage is misconfigured: its bucket does not exist (NoSuchBucket)"
        exc = exc.__cause__ or exc.__context__
    return None


def outage_of(exc: BaseException | None) -> tuple[str, str] | None:
    """Return (what is down, what that stops) for an error that means a service is down.

    The error's causes and contexts are looked through too; None when none is an outage.
    S3 that cannot be reached, or answers 5xx (`storage_failing`), counts as
    file storage down; so does a bucket that does not exist
    (`storage_misconfigured`): every request would meet it, whatever the
    session, until the operator makes the bucket or configures another, so
    the work waits for that as for storage that is down, rather than fail
    each session as if its bytes were at fault.
    """
    if reason := storage_misconfigured(exc):
        return "file storage", (
            f"Pairfix cannot read or write the sessions' files: its {reason}, so no upload, "
            "download or timeline that needs them can be made."
        )
    while exc is not None:
        for kinds, service, effect in OUTAGES:
            if isinstance(exc, kinds) or (service == "file storage" and storage_failing(exc)):
                return service, effect
        exc = exc.__cause__ or exc.__context__
    return None


def server_error(request: HttpRequest) -> HttpResponse:
    """Answer 503 naming the service that is down, or Django's plain 500 for anything else."""
    outage = outage_of(sys.exc_info()[1])
    if outage is None:
        html = loader.get_template("500.html").render({})
        return HttpResponse(html, status=500)
    service, effect = outage
    html = loader.get_template("503.html").render({"service": service, "effect": effect})
    response = HttpResponse(html, status=503)
    response["Retry-After"] = "30"
    return response


def user_lookup_once(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
    """Middleware (after AuthenticationMiddleware): look the user up at most once a request.

    With the database down, each look-up waits for the connect timeout; the
    request logger asks for the user again while the request fails, which
    would double the wait before the 503. A failed look-up raises its error
    again at once instead.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        failed: list[DatabaseError] = []

        def user() -> Any:
            if failed:
                raise failed[0]
            try:
                return get_user(request)
            except DatabaseError as exc:
                failed.append(exc)
                raise

        request.user = SimpleLazyObject(user)  # type: ignore[assignment]
        return get_response(request)

    return middleware
