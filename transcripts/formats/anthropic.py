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
from transcripts.formats.base import LIKELY, LOOSE, Format, Placed, merge_blocks, sample_messages


class Anthropic(Format):
    id = "anthropic"
    label = "Anthropic Messages"
    jsonl = False
    provider = "anthropic"
    inline_results = True
    priority = 50

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return LIKELY for user and assistant messages with a `tool_use` or `tool_result`."""
        messages = sample_messages(sample)
        if not messages:
            return 0.0
        for message in messages:
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                return 0.0
            if "tool_calls" in message or "parts" in message:
                return 0.0
        sure = any(
            isinstance(m.get("content"), list)
            and any(
                isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
                for b in m["content"]
            )
            for m in messages
        )
        return LIKELY if sure else 0.0

    def sniff_loose(self, sample: list[Any], filename: str) -> float:
        """Return LOOSE for user and assistant messages with text or block `content`."""
        messages = sample_messages(sample)
        could = bool(messages) and all(
            isinstance(m, dict)
            and m.get("role") in ("user", "assistant")
            and isinstance(m.get("content"), (str, list))
            for m in messages or ()
        )
        return LOOSE if could else 0.0

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
