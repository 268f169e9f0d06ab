"""`/healthz`: can this process reach its database, task queue and blob storage right now?

For load balancers and orchestrators, so no login. Each check has a short
timeout; the answer is JSON with a status per check, 200 when all pass and 503
when one fails; the checks run side by side, so the answer takes about TIMEOUT
at most (twice that for a server that takes as long to accept as to answer).
A server that answers a byte at a time passes every timeout (each bounds one
wait for the next bytes): a check is waited for WAIT seconds at most, and one
still running then is not started again beside itself (`_start`). A failure
is logged in full but answered with the exception's type only, and a reason
of a few fixed words where one is known ("no answer within 2 s"): the
endpoint is public, and error texts name hosts, buckets and users.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import structlog
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from project.celery import app as celery_app

logger = structlog.get_logger(__name__)

# Seconds a check may take: well under a typical probe's own timeout.
TIMEOUT = 2  # seconds
# Seconds the answer waits for the broker's and storage's checks: their timeouts to
# connect and to answer, and one more.
WAIT = 2 * TIMEOUT + 1


def check_database() -> None:
    """Run `SELECT 1` on the default database; raise if it cannot be reached or answered.

    PostgreSQL gives up connecting after settings' `connect_timeout` and the
    query after TIMEOUT (a statement timeout local to this transaction).
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL statement_timeout = %s", [int(TIMEOUT * 1000)])
        cursor.execute("SELECT 1")
        if cursor.fetchone() != (1,):
            raise RuntimeError("SELECT 1 did not return 1")


def check_broker() -> None:
    """Connect to the Celery broker once (no retries, TIMEOUT seconds); raise if it fails.

    For the filesystem transport, the folder tasks are written to must be a
    writable directory.
    """
    with celery_app.connection_for_write(connect_timeout=TIMEOUT) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=TIMEOUT)
        if conn.transport_cls == "filesystem":
            folder = str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_out"])
            if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
                raise OSError(f"broker folder {folder} is not a writable directory")


def check_storage() -> None:
    """Ask the blob storage for its bucket (one HEAD, TIMEOUT to connect and to answer).

    Raises if it fails (`S3BlobStorage.check`). For local storage,
    MEDIA_ROOT must be a writable directory.
    """
    check = getattr(default_storage, "check", None)
    if check is not None:  # transcripts.storage.S3BlobStorage
        check(TIMEOUT)
        return
    folder = settings.MEDIA_ROOT
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        raise OSError(f"media folder {folder} is not a writable directory")


def reason_of(exc: Exception) -> str | None:
    """Return the few words that say why a check failed, where known, naming nothing.

    "no answer within 2 s" (a server that accepts and stays silent),
    "no connection within 2 s", or for S3's NoSuchBucket "the bucket does not
    exist (NoSuchBucket)"; None for any other error.
    """
    if "transcripts.storage" not in sys.modules:  # only the S3 storage's errors have reasons
        return None
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    from transcripts.storage import is_missing_bucket

    if isinstance(exc, ReadTimeoutError):
        return f"no answer within {TIMEOUT} s"
    if isinstance(exc, ConnectTimeoutError):
        return f"no connection within {TIMEOUT} s"
    if is_missing_bucket(exc):
        return "the bucket does not exist (NoSuchBucket)"
    return None


def _run(name: str, check: Callable[[], None]) -> dict[str, object]:
    """Run one check; return its status and milliseconds, and the error's type if it failed.

    With the error's type comes its `reason_of`, where one is known.
    """
    start = time.perf_counter()
    try:
        check()
    except Exception as exc:
        result: dict[str, object] = {"status": "error", "error": type(exc).__name__}
        if reason := reason_of(exc):
            result["reason"] = reason
        logger.warning("health_check_failed", check=name, error=str(exc), exc_info=exc)
    else:
        result = {"status": "ok"}
    result["ms"] = round((time.perf_counter() - start) * 1000, 1)
    return result


# This process's threads of the broker's and storage's checks, its pid, and the check of
# each name not yet ended: one a server holds (a byte at a time) is waited for again by
# the next request, not run again beside it, so a process holds one thread a check at most.
_checks: tuple[int, ThreadPoolExecutor] | None = None
_running: dict[str, Future[dict[str, object]]] = {}
_running_lock = threading.Lock()


def _start(name: str, check: Callable[[], None]) -> Future[dict[str, object]]:
    """Start `_run` of `check` on a thread of this process's; return its future.

    A check of `name` still running from an earlier request is returned
    instead of started again beside it. A forked child makes threads of its own.
    """
    global _checks
    with _running_lock:
        if _checks is None or _checks[0] != os.getpid():
            _checks = (os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="healthz"))
            _running.clear()
        future = _running.get(name)
        if future is None or future.done():
            future = _running[name] = _checks[1].submit(_run, name, check)
        return future


def _result(name: str, future: Future[dict[str, object]], until: float) -> dict[str, object]:
    """Return the check's result, or an error when it has not ended by `until` (perf_counter).

    That error is {"status": "error", "error": "TimeoutError", "reason":
    "no whole answer within 5 s", "ms"}; the check keeps its thread until it ends.
    """
    try:
        return future.result(timeout=max(0.0, until - time.perf_counter()))
    except FutureTimeout:
        logger.warning("health_check_unfinished", check=name, seconds=WAIT)
        return {
            "status": "error",
            "error": "TimeoutError",
            "reason": f"no whole answer within {WAIT} s",
            "ms": round(WAIT * 1000, 1),
        }


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Answer `{"status": "ok"|"error", "checks": {name: {"status", "ms"[, "error", "reason"]}}}`.

    Status 200 when every check passes, 503 otherwise.
    """
    # The broker's and storage's checks run beside the database's (which keeps this
    # thread's connection), so the answer takes about TIMEOUT even when all are down,
    # and WAIT at most.
    until = time.perf_counter() + WAIT
    broker, storage = _start("broker", check_broker), _start("storage", check_storage)
    checks = {
        "database": _run("database", check_database),
        "broker": _result("broker", broker, until),
        "storage": _result("storage", storage, until),
    }
    ok = all(result["status"] == "ok" for result in checks.values())
    return JsonResponse(
        {"status": "ok" if ok else "error", "checks": checks}, status=200 if ok else 503
    )
