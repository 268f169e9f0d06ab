"""OpenAI Chat Completions messages: a JSON array or `{"messages": [...]}`, formats.md §2.

An assistant message's `tool_calls[k]` is answered by a `role: "tool"` message
with that `tool_call_id`, in the messages right after it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from transcripts.core.model import Op, Record, Role, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    LIKELY,
    LOOSE,
    Format,
    MessageSniff,
    Placed,
    add_call,
    marker_text,
    preview,
    previews_kept,
    sniff_messages,
)
from transcripts.formats.display import Shown, ShownKind, cut, message_rule, show_calls

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}


def _tool_message(m: Any) -> bool:
    """Return True for a message with `tool_calls`, or a `tool` message with its id."""
    return isinstance(m, dict) and (
        "tool_calls" in m or (m.get("role") == "tool" and "tool_call_id" in m)
    )


def _text_message(m: Any) -> bool:
    """Return True for a message with a `role` and text (or no) `content`."""
    return (
        isinstance(m, dict)
        and isinstance(m.get("role"), str)
        and (m.get("content") is None or isinstance(m.get("content"), str))
    )


class OpenAIChat(Format):
    id = "openai_chat"
    label = "OpenAI Chat Completions messages"
    jsonl = False
    provider = "openai_chat"
    native_text = "aborted"
    priority = 80

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY for messages with `tool_calls`, or a `tool` message with its id.

        Loose: LOOSE for messages that all have a `role` and text (or no) `content`.
        """
        if loose:
            return sniff_messages(root, LOOSE, every=(_text_message,))
        return sniff_messages(root, LIKELY, some=(_tool_message,))

    def classify(self, obj: Any, record: Record) -> None:
        """Read a message; without previews (`base.without_previews`) its text stays empty."""
        role = obj.get("role")
        record.kind = str(role)
        record.role = _ROLES.get(str(role), Role.SYSTEM)
        show = previews_kept(record)
        content = obj.get("content")
        if content not in (None, "", []):
            record.other_blocks = 1
        texts = [preview(content)] if record.other_blocks and show else []
        if role == "tool":
            # Without previews a result keeps its text only if it is an earlier repair's marker.
            text = preview(content) if show else marker_text(content)
            record.results.append(
                ToolResult(str(obj.get("tool_call_id") or ""), record.index, 0, False, text)
            )
            record.other_blocks = 0
        calls = obj.get("tool_calls")
        # `content` is block 0 when present and the calls follow it, as a model writes them.
        first = record.other_blocks
        for k, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, dict) else None
            raw_name = function.get("name") if isinstance(function, dict) else None
            name = raw_name if isinstance(raw_name, str) else ""
            call_id = call.get("id") if isinstance(call, dict) else None
            args = function.get("arguments") if isinstance(function, dict) else None
            add_call(record, first + k, call_id, raw_name, args)
            # Arguments that are not text are written out even without previews: writing
            # them can fail (nesting too deep), and a record must fail the same either way.
            shown = args if isinstance(args, str) else json.dumps(args)
            if show:
                texts.append(f"{name}({preview(shown, 200)})")
        record.text = preview(" ".join(texts)) if show else ""

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        sibling = next((r.obj for r in transcript.records if r.role is Role.TOOL), None)
        return ordered_like(
            sibling, {"role": "tool", "tool_call_id": op.call.id, "content": op.text}
        )

    def carry(self, transcript: Transcript, op: Op) -> Any:
        raise ValueError("Chat Completions tool messages are whole records; they move whole")

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        if obj.get("role") == "tool":
            obj["tool_call_id"] = new_id
            return
        first = 0 if obj.get("content") in (None, "", []) else 1
        obj["tool_calls"][block - first]["id"] = new_id

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        out = copy.copy(obj)
        first = 0 if obj.get("content") in (None, "", []) else 1
        all_calls = obj.get("tool_calls") or []
        calls = [all_calls[j - first] for j in order if j >= first]
        if calls:
            out["tool_calls"] = calls
        else:
            # The API rejects an empty `tool_calls` array.
            out.pop("tool_calls", None)
        return out


# How the timeline shows Chat Completions messages (display.py runs the rules of every format).


@message_rule(70)
def _reasoning_content(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show a message's `reasoning_content` text as thinking."""
    if isinstance(node.get("reasoning_content"), str) and node["reasoning_content"]:
        out.append(Shown(ShownKind.THINKING, cut(node["reasoning_content"])))
    return False


@message_rule(50)
def _tool_calls(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show a message's `tool_calls`."""
    show_calls(node.get("tool_calls"), out, depth)
    return False
