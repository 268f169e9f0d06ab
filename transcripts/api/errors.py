"""One JSON shape for every API error: {"error": {"code": ..., "message": ...}}.

Codes are stable (clients branch on them); messages are for people. A
validation error adds "fields": {field name: [messages]}. Errors are plain
JSON responses, whatever the request's Accept header chose for success.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from rest_framework import exceptions, status
from rest_framework.views import set_rollback

from transcripts.outages import outage_of, storage_misconfigured

logger = logging.getLogger(__name__)


class ApiError(exceptions.APIException):
    """An error with a stable `code`, raised by the API's views."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The request is not valid."

    def __init__(self, message: str | None = None, code: str | None = None) -> None:
        super().__init__(message or self.default_detail, code or self.default_code)


class NotFound(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "not_found"
    default_detail = "Not found."


class Conflict(ApiError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The request conflicts with the current state of the resource."


class NotAppendable(Conflict):
    default_code = "not_appendable"
    default_detail = "Records cannot be appended to this session."


class TooLarge(ApiError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The upload is larger than the limits allow."


class StorageMisconfigured(ApiError):
    """The file storage cannot work as configured (`outages.storage_misconfigured`)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    default_detail = "The file storage is misconfigured."
    wait = 30  # seconds, the Retry-After of an outage: the operator may fix it meanwhile


class BrokerUnavailable(ApiError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "broker_unavailable"
    default_detail = "The task queue cannot be reached."


# DRF's own exceptions, by class, and the code each answers with.
CODES: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ValidationError, "bad_request"),
    (exceptions.ParseError, "bad_request"),
    (exceptions.AuthenticationFailed, "invalid_token"),
    (exceptions.NotAuthenticated, "not_authenticated"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "throttled"),
]


def error_response(
    status_code: int,
    code: str,
    message: str,
    *,
    fields: Any = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """Return the JSON error response {"error": {"code", "message"[, "fields"]}}."""
    error: dict[str, Any] = {"code": code, "message": message}
    if fields is not None:
        error["fields"] = fields
    return JsonResponse({"error": error}, status=status_code, headers=headers)


def _message(detail: Any) -> str:
    """Return a validation error's details as one line: "field: message; field: message"."""
    if isinstance(detail, dict):
        parts = []
        for name, value in detail.items():
            text = _message(value)
            parts.append(text if name == "non_field_errors" else f"{name}: {text}")
        return "; ".join(parts)
    if isinstance(detail, list):
        return " ".join(_message(item) for item in detail)
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> JsonResponse:
    """Return the JSON error response for `exc`, raised inside an API view.

    DRF's exceptions and Django's 404, permission and suspicious-request
    errors keep their status; an outage (`outages.outage_of`: the database,
    queue or file storage down, a blob unreadable) is a 503, and so is a
    bucket that does not exist, its message naming it
    (`outages.storage_misconfigured`); anything else is a bug: logged, and
    answered with a 500 in the same shape.
    """
    set_rollback()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, RequestDataTooBig):
        return error_response(413, "too_large", "The request body is too large.")
    elif isinstance(exc, SuspiciousOperation):
        return error_response(400, "bad_request", str(exc) or "The request is not valid.")
    if not isinstance(exc, exceptions.APIException) and (reason := storage_misconfigured(exc)):
        logger.warning("API storage misconfigured", exc_info=exc)
        exc = StorageMisconfigured(f"The {reason}.")
    if not isinstance(exc, exceptions.APIException) and (outage := outage_of(exc)):
        logger.warning("API outage", exc_info=exc)
        return error_response(
            503, "unavailable", f"The {outage[0]} is down: {exc}", headers={"Retry-After": "30"}
        )
    if not isinstance(exc, exceptions.APIException):
        logger.exception("API error", exc_info=exc)
        return error_response(500, "server_error", "Something went wrong on our side.")
    headers = {}
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    if wait := getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, ApiError):
        # An ApiError's detail is one string, so its codes are one code.
        code = str(exc.get_codes())
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)
    code = next((code for cls, code in CODES if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.NotAuthenticated):
        return error_response(
            exc.status_code,
            code,
            f"{exc.detail} Send `Authorization: Bearer <token>`, a token made on the "
            "dashboard's API tokens page (/tokens/).",
            headers=headers,
        )
    if isinstance(exc, exceptions.ValidationError):
        return error_response(
            exc.status_code,
            code,
            _message(exc.detail) or "The request is not valid.",
            fields=exc.detail if isinstance(exc.detail, dict) else None,
            headers=headers,
        )
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Answer a path under /api/ that names no operation (naming it without a final slash)."""
    message = f"There is no API operation at {request.path}."
    bare = request.path.rstrip("/")
    if bare != request.path and _operation_at(bare):
        message += f" The API's paths end without a slash: {bare}."
    return error_response(404, "not_found", message)


def _operation_at(path: str) -> bool:
    """Return True when `path` names an API operation (not this 404 view)."""
    try:
        match = resolve(path)
    except Resolver404:
        return False
    return match.url_name != "api_not_found"
