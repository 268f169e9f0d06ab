"""What the timeline shows of one record: its content blocks, read from the record's bytes.

The model keeps a one-line preview of each record, which is all detection and
repair need. The timeline shows more: a tool call's name and arguments, a
tool result's content, thinking, images as placeholders with their size. It
reads them from the record's own byte span when a window of rows is shown, so
a request parses the records it shows and nothing else.

Blocks are recognised by their shape rather than by format, since the
formats share them (formats.md): Anthropic `tool_use`/`tool_result`/
`thinking`/`image` blocks (Claude Code, Cline, Anthropic Messages), OpenAI
`tool_calls` and `role: tool` messages (Chat Completions, LangChain, Vercel
AI), Responses items (`function_call`, `function_call_output`, `reasoning`;
Codex payloads), Gemini parts (`functionCall`, `functionResponse`,
`inlineData`, `thought`), Gemini CLI `toolCalls` and `thoughts`, Bedrock
`toolUse`/`toolResult`/`reasoningContent`, OpenClaw `toolCall` and
`toolResult` messages, OpenHands action and observation events.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import orjson

# Characters of one block kept for display; a longer block is cut with a note.
MAX_TEXT = 200_000
# How much of a block the timeline shows before it is expanded.
PREVIEW_LINES = 6
PREVIEW_CHARS = 600
_MAX_DEPTH = 12


class ShownKind(StrEnum):
    """What a shown block is."""

    TEXT = "text"
    THINKING = "thinking"
    CALL = "call"
    RESULT = "result"
    IMAGE = "image"
    RAW = "raw"  # the bytes of a record that is not valid JSON


@dataclass(frozen=True, slots=True)
class Shown:
    """One content block of a record as the timeline shows it.

    `text` is the block's text (a call's arguments as indented JSON, a
    result's content, an image's URL when it is not inline); `size` is an
    inline image's size in bytes (None when unknown); `media_type` its type.
    """

    kind: ShownKind
    text: str = ""
    name: str = ""
    tool_call_id: str = ""
    is_error: bool = False
    media_type: str = ""
    size: int | None = None

    @property
    def line_count(self) -> int:
        """Return the number of lines of `text` (0 when it is empty)."""
        return self.text.count("\n") + 1 if self.text else 0

    @property
    def preview(self) -> str:
        """Return the start of `text`: PREVIEW_LINES lines, at most PREVIEW_CHARS characters."""
        return "\n".join(self.text[: PREVIEW_CHARS + 1].split("\n")[:PREVIEW_LINES])[:PREVIEW_CHARS]

    @property
    def is_cut(self) -> bool:
        """Return True when `preview` is shorter than `text`."""
        return len(self.text) > len(self.preview)


_CALL_TYPES = frozenset(
    {
        "tool_use",
        "server_tool_use",
        "mcp_tool_use",
        "toolCall",
        "tool-call",
        "tool_call",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
    }
)
_RESULT_TYPES = frozenset(
    {
        "tool_result",
        "web_search_tool_result",
        "mcp_tool_result",
        "tool-result",
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
    }
)
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking", "reasoning"})
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image", "output_image"})
_TEXT_TYPES = frozenset({"text", "input_text", "output_text", "summary_text", "refusal"})
# Roles (or LangChain types) of a message that is itself one tool result.
_RESULT_ROLES = frozenset({"tool", "toolResult", "function", "ipython"})
# Keys under which a line wraps its message or item.
_ENVELOPES = ("message", "payload", "llm_message", "data", "item")
_CALL_ID_KEYS = ("call_id", "toolCallId", "toolUseId", "tool_use_id", "tool_call_id", "id")


def read_record(data: bytes) -> list[Shown]:
    """Return the blocks of the record whose own bytes are `data` (one line or array element).

    Bytes that are not valid JSON come back as one RAW block of their text
    (invalid UTF-8 replaced). Never raises.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return [Shown(ShownKind.RAW, _cut(data.decode("utf-8", "replace")))]
    return blocks(obj)


def blocks(obj: Any) -> list[Shown]:
    """Return the content blocks of a parsed record, in the order it holds them."""
    out: list[Shown] = []
    try:
        _walk(obj, out, 0)
    except RecursionError:
        out.append(Shown(ShownKind.RAW, "(nested too deeply to show)"))
    return out


def timestamp(data: bytes) -> str:
    """Return when the record whose bytes are `data` was written, as "YYYY-MM-DD HH:MM:SS".

    Looks at the record's `timestamp` (an ISO string or milliseconds since the
    epoch), then its message's. Returns "" when there is none or it does not parse.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(obj, dict):
        return ""
    for node in (obj, *(obj.get(key) for key in _ENVELOPES)):
        if isinstance(node, dict):
            value = node.get("timestamp")
            if isinstance(value, str) and value:
                return value.replace("T", " ")[:19]
            if isinstance(value, int | float) and not isinstance(value, bool):
                try:
                    moment = datetime.fromtimestamp(value / 1000, UTC)
                except (OverflowError, OSError, ValueError):
                    return ""
                return moment.strftime("%Y-%m-%d %H:%M:%S")
    return ""


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT} more characters not shown)"


def _json_text(value: Any) -> str:
    """Return `value` as indented JSON text; a string holding JSON is indented too."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return _cut(value)
        if not isinstance(parsed, dict | list):
            return _cut(value)
        value = parsed
    try:
        return _cut(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
    except TypeError:  # integers beyond 64 bits
        return _cut(json.dumps(value, indent=2, ensure_ascii=False))


def _text_of(value: Any, images: list[Shown], depth: int = 0) -> str:
    """Return the text of a result's content; inline images go to `images`."""
    if depth > _MAX_DEPTH:
        return "…"
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for item in value:
            if isinstance(item, dict) and _is_image(item):
                images.append(_image(item))
            else:
                parts.append(_text_of(item, images, depth + 1))
        return "\n".join(part for part in parts if part)
    if isinstance(value, dict):
        if _is_image(value):
            images.append(_image(value))
            return ""
        if isinstance(value.get("text"), str):
            return str(value["text"])
        for key in ("content", "value", "output"):
            if key in value and len(value) <= 3:
                return _text_of(value[key], images, depth + 1)
    return _json_text(value)


def _call_id(node: dict[str, Any]) -> str:
    for key in _CALL_ID_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _call(node: dict[str, Any]) -> Shown:
    function = node.get("function") if isinstance(node.get("function"), dict) else {}
    assert isinstance(function, dict)
    name = node.get("name") or node.get("toolName") or function.get("name") or ""
    if not name and node.get("type") == "local_shell_call":
        name = "local_shell"  # Codex names the tool so (formats/codex.py); the item does not
    for key in ("input", "arguments", "args", "action"):
        if key in node:
            args = node[key]
            break
    else:
        args = function.get("arguments", "")
    return Shown(
        ShownKind.CALL,
        _json_text(args) if args not in ("", None) else "",
        name=str(name),
        tool_call_id=_call_id(node),
    )


def _result(node: dict[str, Any], out: list[Shown], tool_call_id: str = "") -> None:
    for key in ("content", "output", "result", "response", "value"):
        if key in node:
            content = node[key]
            break
    else:
        content = None
    images: list[Shown] = []
    text = _text_of(content, images)
    if text[:1] in ("{", "["):
        text = _json_text(text)  # tools often answer with JSON text: indented, it reads
    error = node.get("is_error") is True or node.get("isError") is True
    error = error or node.get("status") in ("error", "failed")
    out.append(
        Shown(
            ShownKind.RESULT,
            _cut(text),
            name=str(node.get("name") or node.get("toolName") or ""),
            tool_call_id=tool_call_id or _call_id(node),
            is_error=error,
        )
    )
    out.extend(images)


def _type(node: dict[str, Any], key: str = "type") -> str:
    """Return `node[key]` if it is text, else "": a list or an object there is no kind."""
    value = node.get(key)
    return value if isinstance(value, str) else ""


def _is_image(node: dict[str, Any]) -> bool:
    kind = _type(node)
    if kind in _IMAGE_TYPES:
        return True
    media = _media_type(node)
    return media.startswith("image/") or (
        isinstance(node.get("image"), dict) and "source" in node["image"]
    )


def _media_type(node: dict[str, Any]) -> str:
    for holder in (node, node.get("source"), node.get("inlineData"), node.get("fileData")):
        if isinstance(holder, dict):
            for key in ("media_type", "mediaType", "mimeType", "mime_type"):
                if isinstance(holder.get(key), str):
                    return str(holder[key])
    image = node.get("image")
    if isinstance(image, dict) and isinstance(image.get("format"), str):
        return f"image/{image['format']}"
    return ""


def _image(node: dict[str, Any]) -> Shown:
    """Return a placeholder for an image block: its media type and decoded size, never its data."""
    data: Any = None
    source = node.get("source")
    image = node.get("image")
    image_url = node.get("image_url")
    if isinstance(source, dict):
        data = source.get("data") or source.get("url") or source.get("bytes")
    elif isinstance(node.get("inlineData"), dict):
        data = node["inlineData"].get("data")
    elif isinstance(node.get("fileData"), dict):
        data = node["fileData"].get("fileUri")
    elif isinstance(image, dict) and isinstance(image.get("source"), dict):
        data = image["source"].get("bytes")
    elif isinstance(image_url, dict):
        data = image_url.get("url")
    elif isinstance(image_url, str | None) and (image_url or node.get("data") or image):
        data = image_url or node.get("data") or image
    media = _media_type(node)
    if not isinstance(data, str):
        return Shown(ShownKind.IMAGE, media_type=media or "image")
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        media = media or header[5:].split(";")[0]
    elif data.startswith(("http://", "https://", "gs://", "file:")):
        return Shown(ShownKind.IMAGE, _cut(data), media_type=media or "image")
    return Shown(ShownKind.IMAGE, media_type=media or "image", size=_decoded_size(data))


def _decoded_size(data: str) -> int | None:
    """Return the byte length of base64 text without decoding it all; None if it is not base64."""
    stripped = data.strip()
    if len(stripped) % 4 == 1:
        return None
    try:
        base64.b64decode(stripped[-8:] if len(stripped) >= 8 else stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    return len(stripped) * 3 // 4 - stripped[-2:].count("=")


def _thinking(node: dict[str, Any]) -> Shown:
    if node.get("type") == "redacted_thinking":
        return Shown(ShownKind.THINKING, "(redacted)")
    texts: list[str] = []
    for key in ("thinking", "text", "reasoning"):
        if isinstance(node.get(key), str):
            texts.append(node[key])
    for key in ("summary", "content"):
        if isinstance(node.get(key), list):
            texts.extend(str(part.get("text")) for part in node[key] if isinstance(part, dict))
    reasoning = node.get("reasoningContent")
    if isinstance(reasoning, dict):
        text = reasoning.get("reasoningText")
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            texts.append(text["text"])
        elif "redactedContent" in reasoning:
            texts.append("(redacted)")
    if not texts and node.get("encrypted_content"):
        texts.append("(encrypted)")
    return Shown(ShownKind.THINKING, _cut("\n".join(t for t in texts if t)))


def _walk(node: Any, out: list[Shown], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        if node:
            out.append(Shown(ShownKind.TEXT, _cut(node)))
        return
    if isinstance(node, list):
        for item in node:
            _walk(item, out, depth + 1)
        return
    if not isinstance(node, dict):
        return
    if _block(node, out):
        return
    _message(node, out, depth)


def _block(node: dict[str, Any], out: list[Shown]) -> bool:
    """Append `node` as one block if it is one; return False for a message or envelope."""
    kind = _type(node)
    if kind in _CALL_TYPES or isinstance(node.get("function"), dict):
        out.append(_call(node))
    elif isinstance(node.get("functionCall"), dict):
        out.append(_call(node["functionCall"]))
    elif isinstance(node.get("toolUse"), dict):
        out.append(_call(node["toolUse"]))
    elif kind in _RESULT_TYPES:
        _result(node, out)
    elif isinstance(node.get("functionResponse"), dict):
        _result(node["functionResponse"], out)
    elif isinstance(node.get("toolResult"), dict):
        _result(node["toolResult"], out)
    elif kind in _THINKING_TYPES or "reasoningContent" in node:
        out.append(_thinking(node))
    elif node.get("thought") is True and isinstance(node.get("text"), str):
        out.append(Shown(ShownKind.THINKING, _cut(node["text"])))
    elif _is_image(node) or isinstance(node.get("inlineData"), dict):
        out.append(_image(node))
    elif isinstance(node.get("text"), str) and (
        kind in _TEXT_TYPES or not ({"content", "parts", "role"} & node.keys())
    ):
        if node["text"]:
            out.append(Shown(ShownKind.TEXT, _cut(node["text"])))
    else:
        return False
    return True


def _message(node: dict[str, Any], out: list[Shown], depth: int) -> None:
    """Append the blocks of a message, an event or a line wrapping one."""
    role = _type(node, "role") or _type(node)
    if role in _RESULT_ROLES and not isinstance(node.get("data"), dict):
        # A tool message whose parts are result blocks (Vercel AI) is walked like any other.
        parts = _list(node.get("content"))
        if not any(isinstance(p, dict) and _type(p) in _RESULT_TYPES for p in parts):
            _result(node, out)
            return
    for key in ("content", "parts"):
        if key in node:
            _walk(node[key], out, depth + 1)
    for thought in _list(node.get("thoughts")):
        if isinstance(thought, dict):
            text = "\n".join(str(thought[k]) for k in ("subject", "description") if thought.get(k))
            out.append(Shown(ShownKind.THINKING, _cut(text)))
    if isinstance(node.get("reasoning_content"), str) and node["reasoning_content"]:
        out.append(Shown(ShownKind.THINKING, _cut(node["reasoning_content"])))
    if "thought" in node and isinstance(node["thought"], list | str):
        _walk(node["thought"], out, depth + 1)
    for call in _list(node.get("tool_calls")) + _list(node.get("toolCalls")):
        if isinstance(call, dict):
            out.append(_call(call))
            if "result" in call:
                _walk(call["result"], out, depth + 1)
    for key in ("function_call", "tool_call"):
        if isinstance(node.get(key), dict):
            out.append(_call(node[key]))
    if isinstance(node.get("observation"), dict):
        _result(node["observation"], out, _call_id(node) if "tool_call_id" in node else "")
    for key in _ENVELOPES:
        if isinstance(node.get(key), dict):
            _walk(node[key], out, depth + 1)
        elif key == "message" and isinstance(node.get(key), str) and node[key]:
            out.append(Shown(ShownKind.TEXT, _cut(node[key])))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
