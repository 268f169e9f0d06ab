"""Codex CLI rollout JSONL (`~/.codex/sessions/.../rollout-*.jsonl`), formats.md §5.

Lines are `{"timestamp", "type", "payload"}`. Only `response_item` lines are
model input (Responses API items, §3); `event_msg` lines mirror them for the UI
and `turn_context`/`session_meta` are settings. An output links to its call by
`call_id` and may come anywhere after it; a `compacted` line replaces the
history before it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from transcripts.core.model import Op, Record, Role, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import CERTAIN, Format, Placed, add_call, canonical, preview
from transcripts.formats.display import envelope

_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "local_shell_call_output": "local_shell_call",
}
# Codex answers a local shell call with a function_call_output (normalize.rs).
_OUTPUT_FOR = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "function_call_output",
}
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}
_CUSTOM = "custom"  # the family of custom tool calls and their outputs
_ENVELOPE = ("response_item", "event_msg", "turn_context", "compacted", "session_meta")
# Keys no direct-layout header has: other formats' first lines, and the events
# `codex exec --json` printed (`{"id", "msg"}`, see streams.py).
_NOT_HEADER = frozenset({"type", "payload", "msg", "sessionId", "record_type"})


def _is_header(obj: Any) -> bool:
    """Return True for the direct layout's first line: SessionMeta (then SessionMetaWithGit).

    That is `{id, timestamp}`, with `instructions`, `git` and more as
    versions added them, and never a `type`.
    """
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("id"), str)
        and isinstance(obj.get("timestamp"), str)
        and not _NOT_HEADER & obj.keys()
    )


def _is_direct(obj: Any) -> bool:
    """Return True for a later line of the direct layout: a bare item or a state snapshot."""
    return (
        isinstance(obj, dict)
        and "payload" not in obj
        and (obj.get("record_type") == "state" or isinstance(obj.get("type"), str))
    )


class Codex(Format):
    id = "codex"
    label = "Codex rollout JSONL"
    priority = 150
    provider = "openai_responses"
    native_text = "aborted"
    agent = True
    malformed_note = (
        "Codex logs a warning and skips a rollout line it cannot parse when it resumes the session."
    )

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return CERTAIN for rollout lines: the RolloutItem envelope, or the direct layout."""
        first = sample[0] if sample else None
        if isinstance(first, dict) and first.get("type") == "session_meta" and "payload" in first:
            return CERTAIN
        # The older "direct" layout (codex-rs before the RolloutItem envelope): a bare
        # header `{id, timestamp}` (with `instructions` and `git` from some versions
        # on), then bare Responses items and `{"record_type": "state", ...}` lines.
        if _is_header(first) and all(_is_direct(obj) for obj in sample[1:]):
            return CERTAIN
        sure = any(
            isinstance(obj, dict) and obj.get("type") in _ENVELOPE[:3] and "payload" in obj
            for obj in sample
        )
        return CERTAIN if sure else 0.0

    def classify(self, obj: Any, record: Record) -> None:
        kind = obj.get("type")
        payload = obj.get("payload")
        if "payload" not in obj and isinstance(kind, str) and kind not in _ENVELOPE:
            kind, payload = "response_item", obj  # a bare item of the direct layout
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        record.role = Role.META
        record.kind = str(kind)
        if kind is None:
            # The direct layout's header and state snapshots: settings, not model input.
            record.kind = "state" if obj.get("record_type") == "state" else "session_meta"
            return
        if not isinstance(payload, dict):
            return
        item = payload.get("type")
        if not isinstance(item, str):
            item = str(item)
        if kind == "compacted":
            record.boundary = True
            record.text = preview(payload.get("message"))
            return
        if kind == "event_msg":
            record.kind = f"event/{item}"
            record.text = preview(payload.get("message") or payload.get("reason") or "")
            return
        if kind != "response_item":
            return
        record.kind = str(item)
        if item == "message":
            role = payload.get("role")
            record.role = _ROLES.get(str(role), Role.SYSTEM)
            record.other_blocks = 1
            record.text = preview(payload.get("content"))
        elif item in _CALLS:
            record.role = Role.ASSISTANT
            call_id = payload.get("call_id")
            name = payload.get("name") if item != "local_shell_call" else "local_shell"
            if item == "function_call":
                args: Any = payload.get("arguments")
            elif item == "custom_tool_call":
                args = {"input": payload.get("input")}  # free-form text, not JSON
            else:
                args = payload.get("action")
            call = add_call(record, 0, call_id, name, args)
            if item == "custom_tool_call":
                record.calls[-1] = replace(call, family=_CUSTOM)
            record.text = preview(f"{name}({preview(canonical(args), 200)})")
        elif item in _OUTPUTS:
            record.role = Role.TOOL
            text = preview(payload.get("output"))
            # normalize.rs pairs a custom call with a custom output only, and drops any
            # other output as an orphan.
            family = _CUSTOM if item == "custom_tool_call_output" else ""
            record.results.append(
                ToolResult(str(payload.get("call_id") or ""), record.index, 0, False, text, family)
            )
            record.text = text
        elif item == "compaction":
            record.boundary = True
        else:
            # Reasoning and server-side items (web search, ...) are model output
            # that needs no answer.
            record.role = Role.ASSISTANT
            record.other_blocks = 1
            record.leads = item == "reasoning"
            summary = payload.get("summary")
            record.text = preview(summary) if summary else f"({item})"

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        call_line = transcript.records[op.call.record].obj
        item = call_line.get("payload", call_line)
        output_type = _OUTPUT_FOR.get(item.get("type"), "function_call_output")
        sibling = next(
            (
                r.obj
                for r in transcript.records
                if r.results
                and isinstance(r.obj.get("payload"), dict)
                and r.obj["payload"].get("type") == output_type
            ),
            None,
        )
        payload = {"type": output_type, "call_id": op.call.id, "output": op.text}
        if "payload" not in call_line:
            bare = next((r.obj for r in transcript.records if r.results), None)
            return ordered_like(bare, payload)
        line = {
            "timestamp": call_line.get("timestamp"),
            "type": "response_item",
            "payload": ordered_like(sibling["payload"] if sibling else None, payload),
        }
        return ordered_like(sibling, line)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        raise ValueError("Codex outputs are whole records; they move whole")

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        raise ValueError("Codex items hold one block; they are kept or dropped whole")

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        payload = obj["payload"] if isinstance(obj.get("payload"), dict) else obj
        payload["call_id"] = new_id


# A rollout line wraps its item in `payload` (display.py walks every format's envelopes).
envelope("payload", 40)
