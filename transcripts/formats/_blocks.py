"""Anthropic content blocks (`tool_use`, `tool_result`, ...), shared by formats carrying them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transcripts.core.model import Record, ToolResult
from transcripts.formats.base import (
    CallRow,
    ResultRow,
    add_call,
    call_row,
    preview,
    previews_kept,
    result_row,
    result_text,
)


def read_blocks(content: Any, record: Record) -> None:
    """Record the calls, results and other blocks of an Anthropic `content` value.

    Without previews (`base.without_previews`) the record's text is left
    empty; every value whose reading could fail is read all the same.
    """
    show = previews_kept(record)
    if isinstance(content, str):
        record.other_blocks = 1 if content else 0  # "" holds no block to keep or write
        record.text = preview(content) if show else ""
        return
    if not isinstance(content, list):
        return
    texts: list[str] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use" and isinstance(block, dict):
            name = str(block.get("name") or "")
            call_id, args = block.get("id"), block.get("input")
            add_call(record, j, call_id, block.get("name"), args)
            if show:
                texts.append(f"{name}({preview(record.calls[-1].args, 200)})")
        elif kind == "tool_result" and isinstance(block, dict):
            value = block.get("content")
            text = preview(value) if show else result_text(value)
            record.results.append(
                ToolResult(
                    str(block.get("tool_use_id") or ""),
                    record.index,
                    j,
                    block.get("is_error") is True,
                    text,
                )
            )
            texts.append(text)
        else:
            record.other_blocks += 1
            if kind == "thinking":
                texts.append("(thinking)")
            elif kind == "text" and isinstance(block, dict):
                value = block.get("text", "")
                if show or not isinstance(value, str):
                    texts.append(str(value))
            else:
                texts.append(f"({kind or 'block'})")
    record.text = preview(" ".join(texts)) if show else ""


def stored_blocks(content: Any) -> tuple[Sequence[CallRow], Sequence[ResultRow], int]:
    """Return (call rows, result rows, other blocks) of a `content`, as a load keeps them.

    What `read_blocks` and a streamed load without summaries keep (see
    `base.call_row` and `base.result_row`). Raises TypeError for a block
    whose reading `read_blocks` could fail on (a value it would make text of
    that is not text): the loader reads such a line as ever.
    """
    if isinstance(content, str):
        return (), (), 1 if content else 0
    if not isinstance(content, list):
        return (), (), 0
    calls: list[CallRow] | None = None  # made for the first call (most lines have none)
    results: list[ResultRow] | None = None
    other = 0
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            other += 1
            continue
        kind = block.get("type")
        if kind == "text":
            other += 1
            if not isinstance(block.get("text", ""), str):
                raise TypeError("a text block whose text is not a string")
        elif kind == "tool_use":
            name = block.get("name")
            if name and not isinstance(name, str):
                raise TypeError("a tool name that is not a string")
            if calls is None:
                calls = []
            calls.append(call_row(j, block.get("id"), name, block.get("input"), False))
        elif kind == "tool_result":
            if results is None:
                results = []
            is_error = block.get("is_error") is True
            results.append(result_row(j, block.get("tool_use_id"), is_error, block.get("content")))
        else:
            other += 1
            if kind and not isinstance(kind, str):
                raise TypeError("a block type that is not a string")
    return calls or (), results or (), other


def result_block(template: dict[str, Any] | None, tool_use_id: str, text: str) -> dict[str, Any]:
    """Return an error `tool_result` block, keys in the order of `template` when given."""
    values = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text, "is_error": True}
    if not template:
        return values
    out = {key: values[key] for key in template if key in values}
    out.update((key, value) for key, value in values.items() if key not in out)
    return out


def find_result_block(records: list[Record]) -> dict[str, Any] | None:
    """Return an existing `tool_result` block of the file, as a key-order template."""
    for record in records:
        if record.results:
            content = _content(record.obj)
            if isinstance(content, list):
                block = content[record.results[0].block]
                if isinstance(block, dict):
                    return block
    return None


def _content(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return None
    message = obj.get("message")
    if isinstance(message, dict):
        return message.get("content")
    return obj.get("content")


def picked(content: Any, order: list[int]) -> Any:
    """Return the blocks of `content` numbered `order`, in that order."""
    if not isinstance(content, list):
        return content
    return [content[j] for j in order]
