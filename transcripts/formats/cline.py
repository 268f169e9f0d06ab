"""Cline / Roo Code task history (`tasks/<taskId>/api_conversation_history.json`), formats.md §8.3.

The file is an Anthropic `MessageParam[]` (optionally with per-message extras
such as `ts`), so pairing, validation and repair are Anthropic's. Cline's own
tool protocol is text, not blocks: the assistant writes a call as XML in a
text block (`<read_file>\\n<path>src/a.ts</path>\\n</read_file>`) and Cline
answers in the next user message with a text block `[read_file for 'src/a.ts']
Result:` followed by the output (src/core/task/index.ts, `pushToolResult`).
Nothing in such an exchange is a `tool_use` the provider pairs, so it is
never a fault; `text_pairs` shows which call each result answers. Cline
answers a native `tool_use` with the same text (ToolResultUtils.pushToolResult
writes `[name ...] Result:` whatever the call was), so that text block is read
as the call's result rather than the call reported unanswered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from transcripts.core.model import Record, Role, ToolResult, Transcript
from transcripts.formats.anthropic import Anthropic, loose_message
from transcripts.formats.base import SPECIFIC, MessageSniff, preview, sniff_messages

# `[tool_name for 'target'] Result:` or `[tool_name] Result:`, opening its own text block;
# for "next-gen" models some versions wrapped the output in `<function_results>` instead.
_RESULT = re.compile(r"^\[([A-Za-z_][\w-]*)(?: for '.*?')?\] Result:", re.DOTALL)
_FUNCTION_RESULTS = "<function_results>"
# A tool call: a line holding only `<tool_name>`, closed later by `</tool_name>`.
_CALL = re.compile(r"^<([a-z][a-z0-9_]*)>[ \t]*$", re.MULTILINE)
_NOT_TOOLS = frozenset({"thinking", "task", "feedback", "environment_details", "answer"})
FILENAME = "api_conversation_history.json"


def _texts(obj: Any) -> list[str]:
    content = obj.get("content") if isinstance(obj, dict) else None
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def text_calls(obj: Any) -> list[str]:
    """Return the tool names an assistant message calls in Cline's XML text protocol, in order."""
    names: list[str] = []
    for text in _texts(obj):
        after = 0  # a call's parameters are tags too: look past its closing tag
        for match in _CALL.finditer(text):
            name = match.group(1)
            close = text.find(f"</{name}>", match.end())
            if match.start() < after or name in _NOT_TOOLS or close < 0:
                continue
            names.append(name)
            after = close
    return names


def _result_name(text: str) -> str | None:
    """Return the tool a text block answers ("" when it does not say), or None for other text."""
    if text.startswith(_FUNCTION_RESULTS):
        return ""
    match = _RESULT.match(text)
    return match.group(1) if match else None


def text_results(obj: Any) -> list[str]:
    """Return the tools a user message answers with result text blocks ("" for unnamed ones)."""
    return [name for text in _texts(obj) if (name := _result_name(text)) is not None]


def _answers(message: Any) -> bool:
    """Return True for a message holding a result text block."""
    return bool(text_results(message))


@dataclass(frozen=True, slots=True)
class TextPair:
    """A tool call written as text and the text result that answers it (record indexes)."""

    tool: str
    call: int
    result: int | None


def text_pairs(transcript: Transcript) -> list[TextPair]:
    """Return each text-protocol call of a Cline file with the record of its result, if any.

    A call is answered by the next message when that user message opens a
    `[tool ...] Result:` block for the same tool, in order; `result` is None
    for a call the file shows no answer to (an interrupted task).
    """
    records = transcript.records
    messages = [r for r in records if r.role is not Role.META and r.error is None]
    pairs: list[TextPair] = []
    for k, record in enumerate(messages):
        if record.role is not Role.ASSISTANT:
            continue
        calls = text_calls(record.obj)
        following = messages[k + 1] if k + 1 < len(messages) else None
        answers = (
            text_results(following.obj)
            if following is not None and following.role is Role.USER
            else []
        )
        for j, name in enumerate(calls):
            answered = j < len(answers) and answers[j] in (name, "")
            pairs.append(
                TextPair(name, record.index, following.index if answered and following else None)
            )
    return pairs


class Cline(Anthropic):
    id = "cline"
    label = "Cline / Roo Code task history"
    priority = 120  # specialises Anthropic: wins on the files both accept

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return SPECIFIC for Anthropic messages named as Cline names them, or in its protocol.

        What only looks like Anthropic messages is Anthropic's: no loose sniff.
        """
        if loose:
            return 0.0
        named = PurePath(filename).name.endswith(FILENAME)
        some = () if named else (_answers,)
        return sniff_messages(root, SPECIFIC, every=(loose_message,), some=some)

    def classify(self, obj: Any, record: Record) -> None:
        super().classify(obj, record)
        if record.role is Role.ASSISTANT and (names := text_calls(obj)):
            record.kind = "assistant/" + ",".join(names)
        elif names := text_results(obj):
            record.kind = "user/" + ",".join(f"{name or 'tool'} result" for name in names)

    def finish(self, records: list[Record]) -> None:
        """Pair a `tool_use` with the text result Cline wrote for it in the next message.

        Cline answers every call with `[name ...] Result:` text, a native
        `tool_use` too: the text block that names the call's tool (in call
        order) is its result, so the call is not reported unanswered.
        """
        messages = [r for r in records if r.role is not Role.META and r.error is None]
        for call_msg, reply in zip(messages, messages[1:], strict=False):
            if call_msg.role is not Role.ASSISTANT or not call_msg.calls:
                continue
            if reply.role is not Role.USER:
                continue
            answered = {r.tool_call_id for r in reply.results}
            waiting = [c for c in call_msg.calls if c.id not in answered]
            content = reply.obj.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                text = block.get("text") if isinstance(block, dict) else None
                name = _result_name(text) if isinstance(text, str) else None
                call = next((c for c in waiting if name in (c.name, "")), None)
                if name is None or call is None:
                    continue
                waiting.remove(call)
                reply.results.append(ToolResult(call.id, reply.index, j, False, preview(text)))
                reply.other_blocks -= 1
            reply.results.sort(key=lambda r: r.block)
