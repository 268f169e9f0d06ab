"""OpenAI Chat Completions with legacy functions, formats.md §2.4.

Before `tool_calls`, an assistant message made at most one call,
`{"role": "assistant", "function_call": {"name", "arguments"}}`, answered by
`{"role": "function", "name": NAME, "content": TEXT}`. Neither side has an id:
a call is answered by the next `function` message with its name. A file may
mix these with `tool_calls` messages, which read as in §2.
"""

from __future__ import annotations

import json
from typing import Any

from transcripts.core.model import POSITIONAL, Op, Record, Role, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    SPECIFIC,
    MessageSniff,
    Placed,
    add_call,
    preview,
    sniff_messages,
)
from transcripts.formats.display import member_call
from transcripts.formats.openai_chat import OpenAIChat


def _legacy_id(name: Any) -> str:
    """Return the canonical id of a legacy call or answer: its function name.

    Detection pairs a turn's results by id in order and moves a late result
    only when exactly one open call has its id, which is §2.4's rule (the next
    `function` message with the same name) for messages of one call each.
    """
    return f"{POSITIONAL}{name if isinstance(name, str) else ''}"


def _is_legacy(message: Any) -> bool:
    # `model_dump()` of a current SDK message writes `"function_call": null`.
    return isinstance(message, dict) and (
        isinstance(message.get("function_call"), dict) or message.get("role") == "function"
    )


def _legacy_block(obj: dict[str, Any]) -> int:
    """Return the block number of the message's `function_call`: after content and tool_calls."""
    calls = obj.get("tool_calls")
    first = 0 if obj.get("content") in (None, "", []) else 1
    return first + (len(calls) if isinstance(calls, list) else 0)


class OpenAIFunctions(OpenAIChat):
    id = "openai_functions"
    label = "OpenAI Chat Completions messages (legacy functions)"

    priority = 90  # specialises Chat Completions: wins on the files both accept

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return SPECIFIC when some message is a legacy `function_call` or `function` message.

        Files without a legacy message are plain Chat Completions: no loose sniff.
        """
        if loose:
            return 0.0
        return sniff_messages(root, SPECIFIC, some=(_is_legacy,))

    def classify(self, obj: Any, record: Record) -> None:
        super().classify(obj, record)
        role = obj.get("role")
        if role == "function":
            record.kind = "function"
            record.role = Role.TOOL
            record.other_blocks = 0
            text = preview(obj.get("content"))
            record.results.append(
                ToolResult(_legacy_id(obj.get("name")), record.index, 0, False, text)
            )
            record.text = text
            return
        call = obj.get("function_call")
        if role != "assistant" or not isinstance(call, dict):
            return
        raw_name, args = call.get("name"), call.get("arguments")
        name = raw_name if isinstance(raw_name, str) else ""
        call_id = _legacy_id(raw_name)
        add_call(record, _legacy_block(obj), call_id, raw_name, args)
        shown = args if isinstance(args, str) else json.dumps(args)
        record.text = preview(f"{record.text} {name}({preview(shown, 200)})")

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return `{"role": "function", "name": NAME, "content": TEXT}` for a legacy call.

        A `tool_calls` call gets a `tool` message, as in §2. Keys follow an
        existing `function` message.
        """
        assert op.call is not None
        if not op.call.id.startswith(POSITIONAL):
            return super().synthetic(transcript, op)
        sibling = next((r.obj for r in transcript.records if r.kind == "function"), None)
        return ordered_like(sibling, {"role": "function", "name": op.call.name, "content": op.text})

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        legacy = _legacy_block(obj)
        out = super().keep(obj, [j for j in order if j != legacy], placed)
        if legacy not in order and isinstance(obj.get("function_call"), dict):
            del out["function_call"]
        return out


# How the timeline shows a legacy call (display.py runs the rules of every format).
member_call("function_call", 40)
