"""Gemini API `contents` and Gemini CLI checkpoints, formats.md §6.1 and §6.2.

A content is `{"role": "user"|"model"|"function", "parts": [...]}`. A model
content's `functionCall` parts are answered by the `functionResponse` parts
of the very next content, as many responses as calls (Gemini does not merge
consecutive contents). A response links to its call by `id` when the call has
one, else by name and position. A checkpoint (`/chat save`) is
`{"history": [...]}` written with a two-space indent.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import (
    POSITIONAL,
    Op,
    OpKind,
    Record,
    Role,
    ToolResult,
    Transcript,
)
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    LIKELY,
    Format,
    MessageSniff,
    Placed,
    add_call,
    canonical,
    merge_blocks,
    preview,
)
from transcripts.formats.display import Shown, ShownKind, block_rule, cut, member_block, show_image

# What Gemini CLI itself writes as the response of a call the user cancelled.
CANCELLED = "[Operation Cancelled] Reason: User did not allow tool call"


def _is_content(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("parts"), list) and "role" in item


def _positional(name: str, seen: dict[str, int]) -> str:
    """Return the id a call or response without one pairs by: its name and rank."""
    rank = seen.get(name, 0)
    seen[name] = rank + 1
    return f"{POSITIONAL}{name}#{rank}"


class Gemini(Format):
    id = "gemini"
    label = "Gemini API contents"
    priority = 30
    jsonl = False
    provider = "gemini"
    native_text = CANCELLED
    inline_results = True
    result_role = Role.USER
    content_key = "parts"
    array_keys = ("contents",)

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY when every item of the array is a content (`role` and `parts`)."""
        key = self.array_keys[0]
        if loose:
            return 0.0
        if isinstance(root, dict) and isinstance(root.get(key), list):
            return MessageSniff(key, LIKELY, every=(_is_content,))
        if isinstance(root, list) and key == "contents":
            return MessageSniff(None, LIKELY, every=(_is_content,))
        return 0.0

    def classify(self, obj: Any, record: Record) -> None:
        role = obj.get("role")
        record.kind = str(role)
        record.role = Role.ASSISTANT if role == "model" else Role.USER
        parts = obj.get("parts")
        texts: list[str] = []
        call_ranks: dict[str, int] = {}
        response_ranks: dict[str, int] = {}
        for j, part in enumerate(parts if isinstance(parts, list) else []):
            if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                name = str(call.get("name") or "")
                call_id = call.get("id") or _positional(name, call_ranks)
                add_call(record, j, call_id, call.get("name"), call.get("args", {}))
                texts.append(f"{name}({preview(canonical(call.get('args')), 200)})")
            elif isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"]
                name = str(response.get("name") or "")
                result_id = response.get("id") or _positional(name, response_ranks)
                text = preview(response.get("response"))
                body = response.get("response")
                is_error = isinstance(body, dict) and "error" in body
                record.results.append(ToolResult(str(result_id), record.index, j, is_error, text))
                texts.append(text)
            else:
                record.other_blocks += 1
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part, dict):
                    texts.append("(" + ", ".join(part)[:40] + ")")
        record.text = preview(" ".join(texts))

    def _response(self, transcript: Transcript, op: Op) -> dict[str, Any]:
        assert op.call is not None
        response: dict[str, Any] = {"name": op.call.name, "response": {"error": op.text}}
        if not op.call.id.startswith(POSITIONAL):
            response = {"id": op.call.id, **response}
        return {"functionResponse": response}

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        sibling = next(
            (r.obj for r in transcript.records if r.results and isinstance(r.obj, dict)), None
        )
        content = {"role": "user", "parts": [self._response(transcript, op)]}
        return ordered_like(sibling, content)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        assert op.record is not None and op.block is not None
        source = transcript.records[op.record].obj
        return {"role": source.get("role", "user"), "parts": [source["parts"][op.block]]}

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        return dict(obj, parts=merge_blocks(obj.get("parts") or [], order, placed))

    def inline_result(self, transcript: Transcript, op: Op) -> Any:
        if op.kind is OpKind.MOVE_RESULT:
            assert op.record is not None and op.block is not None
            return copy.deepcopy(transcript.records[op.record].obj["parts"][op.block])
        return self._response(transcript, op)


class GeminiCheckpoint(Gemini):
    id = "gemini_checkpoint"
    label = "Gemini CLI checkpoint"
    priority = 20
    array_keys = ("history",)


# How the timeline shows Gemini parts (display.py runs the rules of every format).
member_block("functionCall", 90, ShownKind.CALL)
member_block("functionResponse", 60, ShownKind.RESULT)


@block_rule(30)
def _thought(node: dict[str, Any], out: list[Shown]) -> bool:
    """Show a text part marked `thought: true` as thinking."""
    if node.get("thought") is True and isinstance(node.get("text"), str):
        out.append(Shown(ShownKind.THINKING, cut(node["text"])))
        return True
    return False


@block_rule(15)
def _inline_data(node: dict[str, Any], out: list[Shown]) -> bool:
    """Show an `inlineData` part as an image placeholder."""
    if isinstance(node.get("inlineData"), dict):
        out.append(show_image(node))
        return True
    return False
