"""Reduce a provider request body to the `Message` list a resume preview is compared with.

The agent tier captures the body each agent CLI sends; the preview models what
that body holds. Both are compared as `Message`s: role, texts, the tool call ids
called and the tool call ids answered, in order. Texts are stripped of the
whitespace around them (Claude Code joins user messages with a newline) and
empty ones dropped; thinking, reasoning, images and tool descriptions carry no
text here.
"""

from __future__ import annotations

from typing import Any

from transcripts.replay.base import Message

__all__ = ["message_text", "request_messages"]


def message_text(value: Any) -> str:
    """Return `value` as a text of a `Message`: a string stripped, anything else ""."""
    return value.strip() if isinstance(value, str) else ""


def request_messages(provider: str, body: dict[str, Any]) -> list[Message]:
    """Return the `Message`s of request `body` sent to `provider`, in order.

    `provider` is `anthropic` (`messages[]`, content a string or blocks),
    `openai_responses` (`input[]`: one Message per item; a call item is an
    `assistant` message, an output item a `tool` one, `developer` and `system`
    messages keep their role; reasoning and server-side items are left out),
    `gemini` (`contents[]`, role `model` as `assistant`; a `functionCall` or
    `functionResponse` without `id` is named by its function name) or
    `openai_chat` (`messages[]` with `tool_calls` and `tool` messages).
    Raises ValueError for another provider or a body without that list.
    """
    if provider == "anthropic":
        return [_anthropic(m) for m in _list(body, "messages")]
    if provider == "openai_responses":
        out: list[Message] = []
        for item in _list(body, "input"):
            message = _responses(item)
            if message is not None:
                out.append(message)
        return out
    if provider == "gemini":
        return [_gemini(c) for c in _list(body, "contents")]
    if provider == "openai_chat":
        return [_chat(m) for m in _list(body, "messages")]
    raise ValueError(f"unknown provider {provider!r}")


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list):
        raise ValueError(f"request body has no {key!r} list")
    return value


def _texts(values: list[Any]) -> tuple[str, ...]:
    return tuple(t for t in (message_text(v) for v in values) if t)


def _anthropic(value: Any) -> Message:
    role = str(value.get("role", "")) if isinstance(value, dict) else ""
    content = value.get("content") if isinstance(value, dict) else None
    if isinstance(content, str):
        return Message(role, _texts([content]))
    texts: list[Any] = []
    calls: list[str] = []
    results: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text"))
        elif kind == "tool_use":
            calls.append(str(block.get("id")))
        elif kind == "tool_result":
            results.append(str(block.get("tool_use_id")))
    return Message(role, _texts(texts), tuple(calls), tuple(results))


_CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _responses(item: Any) -> Message | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            texts = _texts([content])
        else:
            texts = _texts([part.get("text") for part in content or [] if isinstance(part, dict)])
        return Message(str(item.get("role", "")), texts)
    if kind in _CALL_ITEMS:
        return Message("assistant", calls=(str(item.get("call_id")),))
    if kind in _OUTPUT_ITEMS:
        return Message("tool", results=(str(item.get("call_id")),))
    return None


def _gemini(content: Any) -> Message:
    role = content.get("role", "user") if isinstance(content, dict) else "user"
    texts: list[Any] = []
    calls: list[str] = []
    results: list[str] = []
    parts = content.get("parts") if isinstance(content, dict) else None
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        if "text" in part:
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            calls.append(str(call.get("id") or call.get("name")))
        elif isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"]
            results.append(str(response.get("id") or response.get("name")))
    return Message(
        "assistant" if role == "model" else str(role), _texts(texts), tuple(calls), tuple(results)
    )


def _chat(value: Any) -> Message:
    role = str(value.get("role", "")) if isinstance(value, dict) else ""
    content = value.get("content") if isinstance(value, dict) else None
    if isinstance(content, list):
        texts = _texts([p.get("text") for p in content if isinstance(p, dict)])
    else:
        texts = _texts([content])
    calls = tuple(
        str(c.get("id"))
        for c in (value.get("tool_calls") or [] if isinstance(value, dict) else [])
        if isinstance(c, dict)
    )
    results = (str(value.get("tool_call_id")),) if role == "tool" else ()
    return Message(role, texts, calls, results)
