"""Gemini CLI session recordings (`~/.gemini/tmp/<hash>/chats/session-*.jsonl`), formats.md §6.3.

A metadata line, then message records `{id, timestamp, type, content, ...}`;
`gemini` records carry `toolCalls[]`, and a call's result is written on the
call itself (`result`: functionResponse parts, with a final `status`). A
message is re-appended under the same `id` whenever it changes: the last write
wins. `{"$rewindTo": id}` drops the messages from that id on; `{"$set": ...}`
updates metadata. An orphan is a call with no result whose status is not final.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import Op, Record, Role, ToolResult, Transcript
from transcripts.formats.base import Format, Placed, add_call, canonical, preview
from transcripts.formats.gemini import CANCELLED

# A call in one of these states needs no result written by anyone else: the CLI
# sends its own response for it.
_FINAL = ("success", "error", "cancelled")


class GeminiCli(Format):
    id = "gemini_cli"
    label = "Gemini CLI session JSONL"
    provider = "gemini"
    native_text = CANCELLED
    results_on_calls = True
    agent = True
    malformed_note = (
        "Gemini CLI skips a line it cannot parse when it loads the session for --resume."
    )

    def sniff(self, sample: list[Any], filename: str) -> bool:
        first = sample[0] if sample else None
        return (
            isinstance(first, dict)
            and "sessionId" in first
            and "projectHash" in first
            and "type" not in first
        )

    def classify(self, obj: Any, record: Record) -> None:
        kind = obj.get("type")
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        if isinstance(obj.get("id"), str) and kind is not None:
            record.uid = obj["id"]
        if "$rewindTo" in obj:
            record.role, record.kind = Role.META, "rewind"
            record.text = str(obj["$rewindTo"])
            return
        if kind not in ("user", "gemini"):
            record.role = Role.META
            record.kind = "metadata" if kind is None else str(kind)
            record.text = preview(obj.get("content") or obj.get("$set") or "")
            return
        record.kind = str(kind)
        record.role = Role.USER if kind == "user" else Role.ASSISTANT
        content = obj.get("content")
        texts = [preview(content)] if content not in (None, "", []) else []
        # Block 0 is the message's own content, so calls never look "after" it.
        record.other_blocks = 1
        calls = obj.get("toolCalls") if kind == "gemini" else None
        results: list[ToolResult] = []
        for k, call in enumerate(calls if isinstance(calls, list) else []):
            if not isinstance(call, dict):
                continue
            call_id, name = call.get("id"), call.get("name")
            add_call(record, k + 1, call_id, name, call.get("args", {}))
            texts.append(f"{name}({preview(canonical(call.get('args')), 200)})")
            answered = call.get("result") is not None or call.get("status") in _FINAL
            if answered:
                text = preview(call.get("result") or call.get("status"))
                error = call.get("status") in ("error", "cancelled")
                results.append(ToolResult(str(call_id or ""), record.index, 0, error, text))
        n = len(record.calls)
        record.results = [
            ToolResult(r.tool_call_id, r.record, n + 1 + k, r.is_error, r.text)
            for k, r in enumerate(results)
        ]
        record.text = preview(" ".join(texts))

    def finish(self, records: list[Record]) -> None:
        """Mark the records a later write of the same message replaced, or a rewind dropped."""
        active: dict[str, Record] = {}  # message id -> its last write, in conversation order
        for record in records:
            if record.kind == "rewind":
                ids = list(active)
                start = ids.index(record.text) if record.text in active else len(ids)
                for uid in ids[start:]:
                    active.pop(uid).inactive = True
            elif record.uid is not None and record.role is not Role.META:
                earlier = active.pop(record.uid, None)
                if earlier is not None:
                    earlier.inactive = True
                active[record.uid] = record

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        out = copy.deepcopy(obj)
        calls = obj.get("toolCalls")
        if isinstance(calls, list):
            answers = dict(placed)
            kept = []
            for b in order:
                if 1 <= b <= len(calls):
                    call = copy.deepcopy(calls[b - 1])
                    if b in answers:
                        text, parts = answers[b]
                        call["result"] = parts
                        call["status"] = "cancelled" if text == CANCELLED else "error"
                    kept.append(call)
            if kept:
                out["toolCalls"] = kept
            else:
                out.pop("toolCalls", None)
        return out

    def inline_result(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        response = {"id": op.call.id, "name": op.call.name, "response": {"error": op.text}}
        return (op.text, [{"functionResponse": response}])
