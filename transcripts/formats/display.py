"""What the timeline shows of one record: its content blocks, read from the record's bytes.

The model keeps a one-line preview of each record, which is all detection and
repair need. The timeline shows more: a tool call's name and arguments, a
tool result's content, thinking, images as placeholders with their size. It
reads them from the record's own byte span when a window of rows is shown, so
a request parses the records it shows and nothing else.

Blocks are recognised by their shape rather than by format, since formats
share them (formats.md). This module knows the shapes several formats share
(Anthropic `tool_use`/`tool_result`/`thinking`/`image` blocks, Responses
items, `role: tool` messages, text) and walks a record with the rules each
format module registers for its own shapes (`block_rule`, `message_rule`,
`member_block`, `member_call`, `envelope`). Rules run highest priority first,
and no two share one, so the order in which modules register them does not
matter.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import orjson

from transcripts.core import jsontext

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
_CALL_ID_KEYS = ("call_id", "toolCallId", "toolUseId", "tool_use_id", "tool_call_id", "id")


def read_record(data: bytes) -> list[Shown]:
    """Return the blocks of the record whose own bytes are `data` (one line or array element).

    Bytes that are not valid JSON come back as one RAW block of their text
    (invalid UTF-8 replaced). Never raises.
    """
    try:
        obj = jsontext.loads(data)
    except orjson.JSONDecodeError:
        return [Shown(ShownKind.RAW, cut(data.decode("utf-8", "replace")))]
    return blocks(obj)


def blocks(obj: Any) -> list[Shown]:
    """Return the content blocks of a parsed record, in the order it holds them."""
    out: list[Shown] = []
    try:
        walk(obj, out, 0)
    except RecursionError:
        out.append(Shown(ShownKind.RAW, "(nested too deeply to show)"))
    return out


def timestamp(data: bytes) -> str:
    """Return when the record whose bytes are `data` was written, as "YYYY-MM-DD HH:MM:SS".

    Looks at the record's `timestamp` (an ISO string or milliseconds since the
    epoch), then its message's. Returns "" when there is none or it does not parse.
    """
    try:
        obj = jsontext.loads(data)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(obj, dict):
        return ""
    for node in (obj, *(obj.get(key) for _, key in _ENVELOPES)):
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


def cut(text: str) -> str:
    """Return `text`, cut to MAX_TEXT characters with a note of how many more there were."""
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT} more characters not shown)"


def _json_text(value: Any) -> str:
    """Return `value` as indented JSON text; a string holding JSON is indented too."""
    if isinstance(value, str):
        try:
            parsed = jsontext.loads(value)
        except orjson.JSONDecodeError:
            return cut(value)
        if not isinstance(parsed, dict | list):
            return cut(value)
        value = parsed
    try:
        return cut(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
    except TypeError:  # integers beyond 64 bits
        return cut(json.dumps(value, indent=2, ensure_ascii=False))


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
                images.append(show_image(item))
            else:
                parts.append(_text_of(item, images, depth + 1))
        return "\n".join(part for part in parts if part)
    if isinstance(value, dict):
        if _is_image(value):
            images.append(show_image(value))
            return ""
        if isinstance(value.get("text"), str):
            return str(value["text"])
        for key in ("content", "value", "output"):
            if key in value and len(value) <= 3:
                return _text_of(value[key], images, depth + 1)
    return _json_text(value)


def call_id(node: dict[str, Any]) -> str:
    """Return the tool call id a call or result block carries under any format's key, or ""."""
    for key in _CALL_ID_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def show_call(node: dict[str, Any]) -> Shown:
    """Return a call block as shown: its tool name, id and arguments as indented JSON."""
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
        tool_call_id=call_id(node),
    )


def show_result(node: dict[str, Any], out: list[Shown], tool_call_id: str = "") -> None:
    """Append a result block as shown to `out`, then the images its content holds.

    `tool_call_id` stands for the id when the result itself carries none.
    """
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
            cut(text),
            name=str(node.get("name") or node.get("toolName") or ""),
            tool_call_id=tool_call_id or call_id(node),
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


def show_image(node: dict[str, Any]) -> Shown:
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
        return Shown(ShownKind.IMAGE, cut(data), media_type=media or "image")
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


def show_thinking(node: dict[str, Any]) -> Shown:
    """Return a thinking or reasoning block as shown: its text, or what hides it."""
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
    return Shown(ShownKind.THINKING, cut("\n".join(t for t in texts if t)))


BlockRule = Callable[[dict[str, Any], list[Shown]], bool]
MessageRule = Callable[[dict[str, Any], list[Shown], int], bool]
_BLOCK_RULES: list[tuple[int, BlockRule]] = []
_MESSAGE_RULES: list[tuple[int, MessageRule]] = []
# Keys under which a line wraps its message or item, with their priorities.
_ENVELOPES: list[tuple[int, str]] = []


def _add(rules: list[tuple[int, Any]], priority: int, item: Any, what: str) -> None:
    """Insert (priority, item) into `rules`, highest first; raise ValueError on a tie."""
    if any(p == priority for p, _ in rules):
        raise ValueError(f"two {what} share priority {priority}")
    rules.append((priority, item))
    rules.sort(key=lambda rule: -rule[0])


def block_rule(priority: int) -> Callable[[BlockRule], BlockRule]:
    """Register a rule for one block: it appends what it shows and returns True, else False.

    A block is a dict that no higher rule took. Raises ValueError when a rule
    already has `priority`.
    """

    def register(rule: BlockRule) -> BlockRule:
        _add(_BLOCK_RULES, priority, rule, "block rules")
        return rule

    return register


def message_rule(priority: int) -> Callable[[MessageRule], MessageRule]:
    """Register a rule for a message (a dict no block rule took), given its nesting depth.

    Every rule runs, highest priority first, appending the blocks it finds,
    until one returns True: the message is shown whole. Raises ValueError
    when a rule already has `priority`.
    """

    def register(rule: MessageRule) -> MessageRule:
        _add(_MESSAGE_RULES, priority, rule, "message rules")
        return rule

    return register


def envelope(key: str, priority: int) -> None:
    """Register `key` as a member under which a line wraps its message or item.

    Envelopes are walked, and searched for a `timestamp`, highest priority
    first. Raises ValueError when an envelope already has `priority`.
    """
    _add(_ENVELOPES, priority, key, "envelopes")


def member_block(key: str, priority: int, kind: ShownKind) -> None:
    """Register a block rule: a block whose `key` member is an object is that call or result.

    For blocks that wrap one (Bedrock `toolUse`, Gemini `functionCall`); `kind`
    is CALL or RESULT. Raises ValueError as `block_rule` does.
    """

    def rule(node: dict[str, Any], out: list[Shown]) -> bool:
        member = node.get(key)
        if not isinstance(member, dict):
            return False
        if kind is ShownKind.CALL:
            out.append(show_call(member))
        else:
            show_result(member, out)
        return True

    block_rule(priority)(rule)


def member_call(key: str, priority: int) -> None:
    """Register a message rule: a message's `key` member, when an object, is a call it makes.

    For messages that hold one call beside their content (a legacy
    `function_call`, an OpenHands `tool_call`). Raises ValueError as `message_rule` does.
    """

    def rule(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
        if isinstance(node.get(key), dict):
            out.append(show_call(node[key]))
        return False

    message_rule(priority)(rule)


def walk(node: Any, out: list[Shown], depth: int) -> None:
    """Append the blocks of `node` (text, a list, a block or a message) to `out`."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        if node:
            out.append(Shown(ShownKind.TEXT, cut(node)))
        return
    if isinstance(node, list):
        for item in node:
            walk(item, out, depth + 1)
        return
    if not isinstance(node, dict):
        return
    for _, block in _BLOCK_RULES:
        if block(node, out):
            return
    for _, message in _MESSAGE_RULES:
        if message(node, out, depth):
            return


def show_calls(calls: Any, out: list[Shown], depth: int) -> None:
    """Append each call of a list of calls, and the `result` a call carries (Gemini CLI)."""
    for call in _list(calls):
        if isinstance(call, dict):
            out.append(show_call(call))
            if "result" in call:
                walk(call["result"], out, depth + 1)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@block_rule(100)
def _call_block(node: dict[str, Any], out: list[Shown]) -> bool:
    if _type(node) in _CALL_TYPES or isinstance(node.get("function"), dict):
        out.append(show_call(node))
        return True
    return False


@block_rule(70)
def _result_block(node: dict[str, Any], out: list[Shown]) -> bool:
    if _type(node) in _RESULT_TYPES:
        show_result(node, out)
        return True
    return False


@block_rule(40)
def _thinking_block(node: dict[str, Any], out: list[Shown]) -> bool:
    if _type(node) in _THINKING_TYPES:
        out.append(show_thinking(node))
        return True
    return False


@block_rule(20)
def _image_block(node: dict[str, Any], out: list[Shown]) -> bool:
    if _is_image(node):
        out.append(show_image(node))
        return True
    return False


@block_rule(10)
def _text_block(node: dict[str, Any], out: list[Shown]) -> bool:
    if isinstance(node.get("text"), str) and (
        _type(node) in _TEXT_TYPES or not ({"content", "parts", "role"} & node.keys())
    ):
        if node["text"]:
            out.append(Shown(ShownKind.TEXT, cut(node["text"])))
        return True
    return False


@message_rule(100)
def _result_message(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    role = _type(node, "role") or _type(node)
    if role in _RESULT_ROLES and not isinstance(node.get("data"), dict):
        # A tool message whose parts are result blocks (Vercel AI) is walked like any other.
        parts = _list(node.get("content"))
        if not any(isinstance(p, dict) and _type(p) in _RESULT_TYPES for p in parts):
            show_result(node, out)
            return True
    return False


@message_rule(90)
def _content(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    for key in ("content", "parts"):
        if key in node:
            walk(node[key], out, depth + 1)
    return False


@message_rule(10)
def _envelopes(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    for _, key in _ENVELOPES:
        if isinstance(node.get(key), dict):
            walk(node[key], out, depth + 1)
        elif key == "message" and isinstance(node.get(key), str) and node[key]:
            out.append(Shown(ShownKind.TEXT, cut(node[key])))
    return False


envelope("message", 50)
envelope("item", 5)
