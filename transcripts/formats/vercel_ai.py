"""Vercel AI SDK `ModelMessage` (v5+) and `CoreMessage` (v4) arrays, formats.md §8.2.

Messages are `{"role": "system"|"user"|"assistant"|"tool", "content": string | parts}`.
An assistant `tool-call` part (`toolCallId`, `toolName`, `input`; v4 `args`)
is answered by a `tool-result` part (`toolCallId`, `output`; v4 `result`,
`isError`) of a `tool` message, which may answer several calls, one part
each. Calls the provider runs itself (`providerExecuted`) carry their result
in the assistant message and need no answer. The SDK itself refuses a
history with unanswered calls (`AI_MissingToolResultsError`); for the order,
Pairfix applies the Chat Completions rules (§2): a call's results come in the
tool message(s) right after it.
"""

from __future__ import annotations

import copy
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
    merge_blocks,
    preview,
    sniff_messages,
)

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}
_TOOL_PARTS = ("tool-call", "tool-result")
_PART_TYPES = frozenset(
    {
        "text",
        "image",
        "file",
        "reasoning",
        "redacted-reasoning",
        *_TOOL_PARTS,
        "tool-approval-request",
        "tool-approval-response",
    }
)
# v5 `output` types that report a failure (v6 adds `execution-denied`).
_ERROR_OUTPUTS = ("error-text", "error-json", "execution-denied")


_APPROVALS = "tool/approval"


def _model_message(m: Any) -> bool:
    """Return True for a message with a `role` and no UI `parts`."""
    return isinstance(m, dict) and "role" in m and "parts" not in m


def _has_tool_part(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) else None
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in _TOOL_PARTS for p in content
    )


def _sdk_part(p: Any) -> bool:
    return isinstance(p, dict) and isinstance(p.get("type"), str) and p["type"] in _PART_TYPES


def _sdk_message(m: Any) -> bool:
    """Return True for an SDK message: a known role, text or SDK parts as `content`."""
    if not (
        isinstance(m, dict)
        and m.get("role") in ("system", "user", "assistant", "tool")
        and "parts" not in m
    ):
        return False
    content = m.get("content")
    return isinstance(content, str) or (
        isinstance(content, list) and all(_sdk_part(p) for p in content)
    )


def _has_parts(m: Any) -> bool:
    return isinstance(m, dict) and isinstance(m.get("content"), list) and bool(m["content"])


def _not_anthropic(m: Any) -> bool:
    """Return True for a `system` or `tool` message, or a part Anthropic has no type for."""
    if not isinstance(m, dict):
        return False
    content = m.get("content")
    return m.get("role") in ("system", "tool") or (
        isinstance(content, list)
        and any(isinstance(p, dict) and p.get("type") not in ("text", "image") for p in content)
    )


def _is_part(part: Any, kind: str) -> bool:
    return isinstance(part, dict) and part.get("type") == kind


def _approval_text(part: dict[str, Any]) -> str:
    verdict = "approved" if part.get("approved") is True else "denied"
    return f"({verdict} {part.get('approvalId')})"


def _is_v4(part: Any) -> bool:
    """Return True when a tool part is written the v4 way (`args`, `result`)."""
    return isinstance(part, dict) and ("result" in part or ("args" in part and "input" not in part))


def _output_text(part: dict[str, Any]) -> tuple[str, bool]:
    """Return (preview, is_error) of a `tool-result` part, v5 `output` or v4 `result`."""
    output = part.get("output")
    if isinstance(output, dict):
        value = output.get("value", output.get("reason"))
        return preview(value), output.get("type") in _ERROR_OUTPUTS
    return preview(part.get("result")), part.get("isError") is True


class VercelAI(Format):
    id = "vercel_ai"
    label = "Vercel AI SDK messages"
    jsonl = False
    provider = "openai_chat"
    # The SDK writes nothing of its own for an interrupted call; this is what
    # Chat Completions agents (Codex, §0.7) write.
    native_text = "aborted"
    priority = 70

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY for messages with `role` whose content parts include tool parts.

        UI messages (`parts`, not `content`) are another format (§8.2). Loose:
        LOOSE for SDK messages without tool parts that no other format could
        be: every part is of an SDK type, and a `system` or `tool` message or
        a part Anthropic has no type for rules out Anthropic Messages, whose
        text-only messages look the same (a file a repair left without calls, say).
        """
        if loose:
            every = (_sdk_message,)
            return sniff_messages(root, LOOSE, every=every, some=(_has_parts, _not_anthropic))
        return sniff_messages(root, LIKELY, every=(_model_message,), some=(_has_tool_part,))

    def classify(self, obj: Any, record: Record) -> None:
        role = obj.get("role")
        record.kind = str(role)
        record.role = _ROLES.get(str(role), Role.SYSTEM)
        content = obj.get("content")
        if isinstance(content, str):
            record.other_blocks = 1
            record.text = preview(content)
            return
        texts: list[str] = []
        parts = content if isinstance(content, list) else []
        if role == "tool" and parts and all(_is_part(p, "tool-approval-response") for p in parts):
            # The SDK sends no approval to the model (convertToLanguageModelPrompt drops
            # these parts, and a tool message left empty with them).
            record.role, record.kind = Role.META, _APPROVALS
            record.other_blocks = len(parts)
            record.text = preview(" ".join(_approval_text(p) for p in parts))
            return
        for j, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "tool-approval-request":
                record.attached = (*record.attached, j)
            if kind == "tool-call" and role == "assistant" and not part.get("providerExecuted"):
                call_id, raw_name = part.get("toolCallId"), part.get("toolName")
                args = part.get("input", part.get("args"))
                name = raw_name if isinstance(raw_name, str) else ""
                add_call(record, j, call_id, raw_name, args)
                texts.append(f"{name}({preview(record.calls[-1].args, 200)})")
            elif kind == "tool-result" and role == "tool":
                text, is_error = _output_text(part)
                call_id = part.get("toolCallId")
                record.results.append(
                    ToolResult(str(call_id or ""), record.index, j, is_error, text)
                )
                texts.append(text)
            else:
                record.other_blocks += 1
                if kind == "text":
                    texts.append(str(part.get("text", "")))
                else:
                    texts.append(f"({kind or 'part'})")
        record.text = preview(" ".join(texts))

    def finish(self, records: list[Record]) -> None:
        """Take calls whose approval ends the history out of pairing: they await the SDK.

        AI SDK v6 resumes a run from a history that ends with
        `tool-approval-response` parts: it executes the approved calls (and
        answers the denied ones) itself, so those calls are no unanswered calls.
        The same shape earlier in the history is a call left without a result.
        """
        k = len(records) - 1
        approved: set[str] = set()
        while k >= 0 and records[k].kind == _APPROVALS:
            approved.update(
                str(p.get("approvalId")) for p in records[k].obj["content"] if isinstance(p, dict)
            )
            k -= 1
        if not approved or k < 0 or records[k].role is not Role.ASSISTANT:
            return
        record = records[k]
        parts = record.obj["content"]
        awaiting = {
            str(parts[j].get("toolCallId"))
            for j in record.attached
            if str(parts[j].get("approvalId")) in approved
        }
        kept = [call for call in record.calls if call.id not in awaiting]
        for call in record.calls:
            if call.id in awaiting:
                record.other_blocks += 1
                record.attached = (*record.attached, call.block)
        record.calls = kept

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return a `tool` message with one error `tool-result` part answering `op.call`.

        v5+: `"output": {"type": "error-text", "value": TEXT}`; v4 (the file's
        results use `result`, or its calls `args`): `"result": TEXT,
        "isError": true`. Keys follow an existing tool message and part.
        """
        assert op.call is not None
        records = transcript.records
        sibling = next((r for r in records if r.role is Role.TOOL and r.results), None)
        sibling_part = sibling.obj["content"][sibling.results[0].block] if sibling else None
        call_part = records[op.call.record].obj["content"][op.call.block]
        part: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": op.call.id,
            "toolName": op.call.name,
        }
        if _is_v4(sibling_part if sibling_part is not None else call_part):
            part.update(result=op.text, isError=True)
        else:
            part["output"] = {"type": "error-text", "value": op.text}
        message = {"role": "tool", "content": [ordered_like(sibling_part, part)]}
        return ordered_like(sibling.obj if sibling else None, message)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        """Return a `tool` message holding only the result part `op` moves out of its message."""
        assert op.record is not None and op.block is not None
        source = transcript.records[op.record].obj
        part = copy.deepcopy(source["content"][op.block])
        return ordered_like(source, {"role": source.get("role", "tool"), "content": [part]})

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        content = obj.get("content")
        if not isinstance(content, list):
            return dict(obj)
        return dict(obj, content=merge_blocks(content, order, placed))
