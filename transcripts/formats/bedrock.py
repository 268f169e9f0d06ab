"""Amazon Bedrock Converse messages: a JSON array or `{"messages": [...]}`.

A message is `{"role": "user"|"assistant", "content": [block]}`; a block is an
object with one member naming its kind: `{"text": ...}`,
`{"toolUse": {"toolUseId", "name", "input"}}`,
`{"toolResult": {"toolUseId", "content": [{"text"}|{"json"}|...], "status"}}`,
`{"reasoningContent": ...}` and others. formats.md has no section for it:
Bedrock applies Anthropic's rules (§1, whose older 400 wording Bedrock still
uses): every `toolUse` is answered by a `toolResult` block at the start of
the next user message, and `toolUseId`s are unique. A `toolResult` with
`"status": "error"` is an error result.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import Op, OpKind, Record, Role, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    LIKELY,
    LOOSE,
    Format,
    MessageSniff,
    Placed,
    add_call,
    merge_blocks,
    preview,
    sniff_messages,
)
from transcripts.formats.display import Shown, ShownKind, block_rule, member_block, show_thinking

# The members of Converse's ContentBlock union.
_BLOCK_KEYS = frozenset(
    {
        "text",
        "image",
        "document",
        "video",
        "toolUse",
        "toolResult",
        "guardContent",
        "cachePoint",
        "reasoningContent",
        "citationsContent",
    }
)


def _converse(message: Any) -> bool:
    """Return True for a user or assistant message whose `content` is Converse blocks.

    Anthropic blocks carry `type`; Converse blocks never do.
    """
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    return isinstance(content, list) and all(
        isinstance(b, dict) and "type" not in b for b in content
    )


def _has_blocks(message: Any) -> bool:
    return isinstance(message, dict) and bool(message.get("content"))


def _has_tool_block(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and ("toolUse" in b or "toolResult" in b) for b in content
    )


def _known_blocks(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and all(
        isinstance(b, dict) and bool(_BLOCK_KEYS.intersection(b)) for b in content
    )


def _result_template(records: list[Record]) -> dict[str, Any] | None:
    """Return an existing `toolResult` member, as a key-order template."""
    for record in records:
        if record.results:
            block = record.obj["content"][record.results[0].block]
            return dict(block["toolResult"])
    return None


class Bedrock(Format):
    id = "bedrock"
    label = "Amazon Bedrock Converse messages"
    jsonl = False
    provider = "bedrock"
    inline_results = True
    result_role = Role.USER
    priority = 60

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY for Converse messages with a `toolUse` or `toolResult` block.

        Loose: LOOSE for Converse messages without tool blocks (every block of a known kind).
        """
        if loose:
            tests = (_converse, _known_blocks)
            return sniff_messages(root, LOOSE, every=tests, some=(_has_blocks,))
        return sniff_messages(root, LIKELY, every=(_converse,), some=(_has_tool_block,))

    def classify(self, obj: Any, record: Record) -> None:
        role = obj.get("role")
        record.kind = str(role)
        record.role = Role.ASSISTANT if role == "assistant" else Role.USER
        content = obj.get("content")
        if isinstance(content, str):
            record.other_blocks = 1
            record.text = preview(content)
            return
        texts: list[str] = []
        for j, block in enumerate(content if isinstance(content, list) else []):
            block = block if isinstance(block, dict) else {}
            use, result = block.get("toolUse"), block.get("toolResult")
            if isinstance(use, dict):
                call_id, raw_name, args = use.get("toolUseId"), use.get("name"), use.get("input")
                name = raw_name if isinstance(raw_name, str) else ""
                add_call(record, j, call_id, raw_name, args)
                texts.append(f"{name}({preview(record.calls[-1].args, 200)})")
            elif isinstance(result, dict):
                text = preview(result.get("content"))
                call_id = result.get("toolUseId")
                is_error = result.get("status") == "error"
                record.results.append(
                    ToolResult(str(call_id or ""), record.index, j, is_error, text)
                )
                texts.append(text)
            else:
                record.other_blocks += 1
                if isinstance(block.get("text"), str):
                    texts.append(block["text"])
                else:
                    texts.append("(" + (next(iter(block), "block")) + ")")
        record.text = preview(" ".join(texts))

    def _result(self, transcript: Transcript, op: Op) -> dict[str, Any]:
        assert op.call is not None
        values = {"toolUseId": op.call.id, "content": [{"text": op.text}], "status": "error"}
        return {"toolResult": ordered_like(_result_template(transcript.records), values)}

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return a user message whose one block is an error `toolResult` answering `op.call`."""
        return {"role": "user", "content": [self._result(transcript, op)]}

    def carry(self, transcript: Transcript, op: Op) -> Any:
        assert op.record is not None and op.block is not None
        source = transcript.records[op.record].obj
        return {"role": "user", "content": [copy.deepcopy(source["content"][op.block])]}

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        content = obj.get("content")
        if isinstance(content, str):
            # A string content is read as one text block (block 0, even when empty);
            # blocks can only be added to a list.
            content = [{"text": content}]
        return dict(obj, content=merge_blocks(content, order, placed))

    def inline_result(self, transcript: Transcript, op: Op) -> Any:
        """Return the `toolResult` block `op` puts into a user message.

        A new error result for an insert; the moved block itself for a move.
        """
        if op.kind is OpKind.MOVE_RESULT:
            assert op.record is not None and op.block is not None
            return copy.deepcopy(transcript.records[op.record].obj["content"][op.block])
        return self._result(transcript, op)


# How the timeline shows Converse blocks (display.py runs the rules of every format).
member_block("toolUse", 80, ShownKind.CALL)
member_block("toolResult", 50, ShownKind.RESULT)


@block_rule(35)
def _reasoning(node: dict[str, Any], out: list[Shown]) -> bool:
    """Show a `reasoningContent` block as thinking."""
    if "reasoningContent" in node:
        out.append(show_thinking(node))
        return True
    return False
