"""Anthropic Messages API messages: a bare array or a request body, formats.md §1 and §8.3.

Cline/Roo's `api_conversation_history.json` is the same array with extra keys
such as `ts`, read by `cline.Cline`. A `tool_use` in an assistant message is
answered by a `tool_result` block at the start of the next user message.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import Op, OpKind, Record, Role, Transcript
from transcripts.formats._blocks import find_result_block, read_blocks, result_block
from transcripts.formats.base import (
    LIKELY,
    LOOSE,
    Format,
    MessageSniff,
    Placed,
    merge_blocks,
    sniff_messages,
)


def _plain_message(message: Any) -> bool:
    """Return True for a user or assistant message with neither `tool_calls` nor `parts`."""
    return (
        isinstance(message, dict)
        and message.get("role") in ("user", "assistant")
        and "tool_calls" not in message
        and "parts" not in message
    )


def _has_tool_block(message: Any) -> bool:
    """Return True for a message whose block `content` holds a `tool_use` or `tool_result`."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
    )


def loose_message(message: Any) -> bool:
    """Return True for a user or assistant message with text or block `content`."""
    return (
        isinstance(message, dict)
        and message.get("role") in ("user", "assistant")
        and isinstance(message.get("content"), (str, list))
    )


class Anthropic(Format):
    id = "anthropic"
    label = "Anthropic Messages"
    jsonl = False
    provider = "anthropic"
    inline_results = True
    result_role = Role.USER
    priority = 50

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY for user and assistant messages with a `tool_use` or `tool_result`.

        Loose: LOOSE for user and assistant messages with text or block `content`.
        """
        if loose:
            return sniff_messages(root, LOOSE, every=(loose_message,))
        return sniff_messages(root, LIKELY, every=(_plain_message,), some=(_has_tool_block,))

    def classify(self, obj: Any, record: Record) -> None:
        role = obj.get("role")
        record.kind = str(role)
        record.role = Role.ASSISTANT if role == "assistant" else Role.USER
        read_blocks(obj.get("content"), record)

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        block = result_block(find_result_block(transcript.records), op.call.id, op.text)
        return {"role": "user", "content": [block]}

    def carry(self, transcript: Transcript, op: Op) -> Any:
        assert op.record is not None and op.block is not None
        source = transcript.records[op.record].obj
        return {"role": "user", "content": [copy.deepcopy(source["content"][op.block])]}

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        content = obj.get("content")
        if isinstance(content, str):
            # A string content is one text block; blocks can only be added to a list.
            content = [{"type": "text", "text": content}] if content else []
        return dict(obj, content=merge_blocks(content, order, placed))

    def inline_result(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        if op.kind is OpKind.MOVE_RESULT:
            assert op.record is not None and op.block is not None
            return transcript.records[op.record].obj["content"][op.block]
        return result_block(find_result_block(transcript.records), op.call.id, op.text)
