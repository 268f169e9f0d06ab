"""Schema post-processing: every operation documents the errors any API call can answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def _has_query(op: dict[str, Any]) -> bool:
    return any(parameter["in"] == "query" for parameter in op.get("parameters", []))


# Status: (when it applies to an operation, its description).
COMMON_ERRORS: dict[str, tuple[Callable[[str, dict[str, Any]], bool], str]] = {
    "400": (lambda path, op: "requestBody" in op or _has_query(op), "Bad request"),
    "401": (lambda path, op: True, "No API token, or one not valid or revoked"),
    "403": (lambda path, op: True, "The token's role in its workspace does not allow this"),
    "404": (lambda path, op: "{" in path or _has_query(op), "Not found in this workspace"),
    "406": (lambda path, op: True, "The Accept header allows no type this operation sends"),
    "413": (lambda path, op: "requestBody" in op, "The request body is too large"),
    "415": (lambda path, op: "requestBody" in op, "The body's Content-Type is not one accepted"),
}


def add_error_responses(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the JSON error responses that apply to each operation, where it has none of its own."""
    for path, operations in result.get("paths", {}).items():
        for op in operations.values():
            responses = op.setdefault("responses", {})
            for code, (applies, description) in COMMON_ERRORS.items():
                if code not in responses and applies(path, op):
                    responses[code] = {"content": ERROR, "description": description}
    return result


def close_requests(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Say of every request body's object that it takes no other keys, as the API refuses them.

    The request components (`COMPONENT_SPLIT_REQUEST`) are those whose name
    ends in `Request`; their serializers are `serializers.Strict`.
    """
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component.setdefault("additionalProperties", False)
    return result
