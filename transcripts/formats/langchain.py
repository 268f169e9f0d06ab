"""LangChain `messages_to_dict` output: a JSON array or `{"messages": [...]}`, formats.md §8.1.

Each element is `{"type": message.type, "data": message.model_dump()}`. An `ai`
message's `data.tool_calls` (`{name, args, id, type: "tool_call"}`) and
`data.invalid_tool_calls` (arguments that did not parse) are answered by
`tool` messages, `data.tool_call_id` naming the call. LangChain enforces no
order itself; the provider behind it does, and Pairfix applies the Chat
Completions rules (§2): one `tool` message per call, right after the call.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import Op, Record, Role, ToolCall, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    SPECIFIC,
    Format,
    MessageSniff,
    Placed,
    call_problem,
    canonical,
    preview,
    sniff_messages,
)
from transcripts.formats.display import envelope

# `message.type` of each message class, chunks included (messages_from_dict reads them all).
_ROLES = {
    "human": Role.USER,
    "HumanMessageChunk": Role.USER,
    "ai": Role.ASSISTANT,
    "AIMessageChunk": Role.ASSISTANT,
    "tool": Role.TOOL,
    "ToolMessageChunk": Role.TOOL,
    "system": Role.SYSTEM,
    "SystemMessageChunk": Role.SYSTEM,
    "chat": Role.USER,
    "ChatMessageChunk": Role.USER,
    "function": Role.TOOL,
    "FunctionMessageChunk": Role.TOOL,
}
_CHAT_ROLES = {"assistant": Role.ASSISTANT, "ai": Role.ASSISTANT, "system": Role.SYSTEM}
_CALL_LISTS = ("tool_calls", "invalid_tool_calls")
# Blocks of a list `content` that repeat a call (Anthropic `tool_use`, LangChain v1 `tool_call`).
_CALL_BLOCKS = ("tool_use", "tool_call")
# A ToolMessage's fields in `model_dump()` order: what a new `tool` element holds.
_TOOL_FIELDS = (
    "content",
    "additional_kwargs",
    "response_metadata",
    "type",
    "name",
    "id",
    "tool_call_id",
    "artifact",
    "status",
)
_REQUIRED = frozenset({"content", "type", "name", "tool_call_id", "status"})


def _calls(data: dict[str, Any]) -> list[tuple[str, int, Any]]:
    """Return (list key, index, entry) of every call of an `ai` message, in block order."""
    found = []
    for key in _CALL_LISTS:
        entries = data.get(key)
        for k, entry in enumerate(entries if isinstance(entries, list) else []):
            found.append((key, k, entry))
    return found


def _kind(element: dict[str, Any]) -> str:
    """Return an element's `type`; "" when it is not a string (any JSON may stand there)."""
    kind = element.get("type")
    return kind if isinstance(kind, str) else ""


def _element(element: Any) -> bool:
    """Return True for anything but an object, and for `{"type", "data": {...}}`."""
    return not isinstance(element, dict) or (
        isinstance(element.get("data"), dict) and "type" in element
    )


def _message(element: Any) -> bool:
    """Return True for an object whose `type` names a LangChain message class."""
    return isinstance(element, dict) and _kind(element) in _ROLES


def _has_content(data: dict[str, Any]) -> bool:
    return data.get("content") not in (None, "", [])


class LangChain(Format):
    id = "langchain"
    label = "LangChain messages (messages_to_dict)"
    jsonl = False
    provider = "openai_chat"
    # LangChain writes nothing of its own for an interrupted call; this is what
    # Chat Completions agents (Codex, §0.7) write.
    native_text = "aborted"

    priority = 110

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return SPECIFIC when every element is `{"type", "data": {...}}` of a LangChain type.

        Elements that are not objects are left out.
        """
        if loose:
            return 0.0
        return sniff_messages(root, SPECIFIC, every=(_element,), some=(_message,))

    def classify(self, obj: Any, record: Record) -> None:
        kind = _kind(obj)
        data = obj.get("data")
        record.kind = kind
        if not isinstance(data, dict) or kind not in _ROLES:
            record.role = Role.META  # RemoveMessage and unknown types are not sent
            return
        record.role = _ROLES[kind]
        if kind in ("chat", "ChatMessageChunk"):
            record.role = _CHAT_ROLES.get(str(data.get("role")), Role.USER)
        content = data.get("content")
        if kind in ("tool", "ToolMessageChunk"):
            text = preview(content)
            call_id = data.get("tool_call_id")
            is_error = data.get("status") == "error"
            record.results.append(ToolResult(str(call_id or ""), record.index, 0, is_error, text))
            record.text = text
            return
        texts = []
        if _has_content(data):
            record.other_blocks = 1
            texts.append(preview(content))
        if record.role is Role.ASSISTANT:
            first = record.other_blocks
            for j, (key, _, entry) in enumerate(_calls(data)):
                self._call(entry, key, record, first + j)
                texts.append(f"{record.calls[-1].name}({preview(record.calls[-1].args, 200)})")
        record.text = preview(" ".join(texts))

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        data = obj["data"]
        if _kind(obj) in ("tool", "ToolMessageChunk"):
            data["tool_call_id"] = new_id
            return
        _, _, entry = _calls(data)[block - (1 if _has_content(data) else 0)]
        entry["id"] = new_id

    def _call(self, entry: Any, key: str, record: Record, block: int) -> None:
        entry = entry if isinstance(entry, dict) else {}
        call_id, raw_name, args = entry.get("id"), entry.get("name"), entry.get("args")
        problem = call_problem(call_id, raw_name, args)
        if not problem and key == "invalid_tool_calls":
            error = entry.get("error")
            problem = f"LangChain could not parse the call ({preview(error, 200) or 'no reason'})"
        name = raw_name if isinstance(raw_name, str) else ""
        record.calls.append(
            ToolCall(str(call_id or ""), name, record.index, block, canonical(args), problem)
        )

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return `{"type": "tool", "data": {...}}`: an error ToolMessage answering `op.call`.

        `data` holds the fields of an existing `tool` element (ToolMessage's
        own fields when the file has none), with the text as content,
        `status: "error"` and nothing copied from that element's values.
        """
        assert op.call is not None
        values: dict[str, Any] = {
            "content": op.text,
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "tool",
            "name": op.call.name,
            "id": None,
            "tool_call_id": op.call.id,
            "artifact": None,
            "status": "error",
        }
        sibling = next(
            (r.obj for r in transcript.records if r.role is Role.TOOL and r.results), None
        )
        template = sibling["data"] if sibling is not None else dict.fromkeys(_TOOL_FIELDS)
        data = {k: v for k, v in values.items() if k in template or k in _REQUIRED}
        return ordered_like(sibling, {"type": "tool", "data": ordered_like(template, data)})

    def carry(self, transcript: Transcript, op: Op) -> Any:
        raise ValueError("LangChain tool messages are whole records; they move whole")

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        """Return an `ai` element holding only the calls numbered `order`.

        A dropped call also leaves `additional_kwargs.tool_calls` (the raw
        OpenAI form, which langchain-openai sends when `tool_calls` is empty)
        and any `tool_use`/`tool_call` block of a list `content` with its id.
        """
        data = obj["data"]
        first = 1 if _has_content(data) else 0
        kept: dict[str, list[Any]] = {key: [] for key in _CALL_LISTS}
        dropped: set[str] = set()
        for j, (key, _, entry) in enumerate(_calls(data)):
            if first + j in order:
                kept[key].append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("id"), str):
                dropped.add(entry["id"])
        out = copy.copy(data)
        for key in _CALL_LISTS:
            if isinstance(data.get(key), list):
                out[key] = kept[key]
        extra = data.get("additional_kwargs")
        if isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
            out["additional_kwargs"] = dict(
                extra, tool_calls=[c for c in extra["tool_calls"] if not _has_id(c, dropped)]
            )
        content = data.get("content")
        if isinstance(content, list):
            out["content"] = [
                b
                for b in content
                if not (
                    isinstance(b, dict) and b.get("type") in _CALL_BLOCKS and _has_id(b, dropped)
                )
            ]
        return dict(obj, data=out)


def _has_id(entry: Any, ids: set[str]) -> bool:
    return isinstance(entry, dict) and entry.get("id") in ids


# `messages_to_dict` wraps each message in `data` (display.py walks every format's envelopes).
envelope("data", 20)
