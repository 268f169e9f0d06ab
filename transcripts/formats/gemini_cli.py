"""Gemini CLI session recordings (`~/.gemini/tmp/<hash>/chats/session-*.jsonl`), formats.md §6.3.

A metadata line, then message records `{id, timestamp, type, content, ...}`;
`gemini` records carry `toolCalls[]`, and a call's result is written on the
call itself (`result`: functionResponse parts, with a final `status`). A
message is re-appended under the same `id` whenever it changes: the last write
wins, in the place of the first. `{"$rewindTo": id}` drops the messages from
that id on, all of them when no message has that id; `{"$set": ...}` updates
metadata. Both follow the CLI's `loadConversationRecord`
(packages/core/src/services/chatRecordingService.ts, @google/gemini-cli
0.61.0), which keeps the messages in a JS `Map` by id.

Before JSONL (gemini-cli #23749) a session was one document written with
`JSON.stringify(conversation, null, 2)`: `{sessionId, projectHash, startTime,
lastUpdated, messages: [...]}`, the same message records in an array
(`GeminiCliSession`). The CLI migrates such a file to JSONL on resume.

A call is answered when its `result` is a non-empty value: the CLI's own
`convertSessionToClientHistory` (packages/core/src/services/chatRecordingService.ts)
sends a functionResponse only for `if (toolCall.result)`, whatever the status,
so a call without one is an orphan and Gemini answers 400.
"""

from __future__ import annotations

import copy
from typing import Any

from transcripts.core.model import Op, Record, Role, ToolResult, Transcript
from transcripts.formats.base import (
    CERTAIN,
    Format,
    MessageSniff,
    Placed,
    add_call,
    canonical,
    preview,
)
from transcripts.formats.display import Shown, ShownKind, cut, message_rule, show_calls
from transcripts.formats.gemini import CANCELLED

# A call in one of these states ended in error: its result is an error response.
_ERRORED = ("error", "cancelled")


def _answered(result: Any) -> bool:
    """Return True when the CLI sends a functionResponse for a call's `result`.

    A string becomes `{output: result}`, a list its parts, an object itself;
    "" and null send nothing, and an empty list sends no part.
    """
    if isinstance(result, (str, list)):
        return bool(result)
    return isinstance(result, dict)


class GeminiCli(Format):
    id = "gemini_cli"
    label = "Gemini CLI session JSONL"
    priority = 10
    provider = "gemini"
    native_text = CANCELLED
    results_on_calls = True
    agent = True
    malformed_note = (
        "Gemini CLI skips a line it cannot parse when it loads the session for --resume."
    )

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return CERTAIN when the first line is the session header (`sessionId`, `projectHash`)."""
        first = sample[0] if sample else None
        sure = (
            isinstance(first, dict)
            and "sessionId" in first
            and "projectHash" in first
            and "type" not in first
        )
        return CERTAIN if sure else 0.0

    def classify(self, obj: Any, record: Record) -> None:
        kind = obj.get("type")
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        # The CLI's loader tests `$rewindTo` first, then a string `id` (`isRewindRecord`,
        # `isMessageRecord`): any such line is a message, whatever its `type`.
        if isinstance(obj.get("$rewindTo"), str):
            record.role, record.kind = Role.META, "rewind"
            record.text = obj["$rewindTo"]
            return
        if isinstance(obj.get("id"), str):
            record.uid = obj["id"]
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
            if _answered(call.get("result")):
                text = preview(call.get("result"))
                error = call.get("status") in _ERRORED
                results.append(ToolResult(str(call_id or ""), record.index, 0, error, text))
        n = len(record.calls)
        record.results = [
            ToolResult(r.tool_call_id, r.record, n + 1 + k, r.is_error, r.text)
            for k, r in enumerate(results)
        ]
        record.text = preview(" ".join(texts))

    def finish(self, records: list[Record]) -> None:
        """Mark the records a later write of the same message replaced, or a rewind dropped.

        As the CLI's `loadConversationRecord` does with its `Map` of messages by
        id: a later write replaces the earlier one in the earlier one's place (a
        rewind to a message before it drops the first write's place, not the
        second's); `{"$rewindTo": id}` drops the message with that id and every
        one after it, and every message when no message has that id.
        """
        # message id -> its last write, in the order of first writes (a dict, like a Map,
        # keeps a key's place when its value is replaced)
        active: dict[str, Record] = {}
        for record in records:
            if record.kind == "rewind":
                ids = list(active)
                start = ids.index(record.text) if record.text in active else 0
                for uid in ids[start:]:
                    active.pop(uid).inactive = True
            elif record.uid is not None:
                earlier = active.get(record.uid)
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
                        status = "cancelled" if text == CANCELLED else "error"
                        call = _with_result(call, parts, status)
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


def _with_result(call: dict[str, Any], parts: Any, status: str) -> dict[str, Any]:
    """Return `call` answered by `parts`, keys where the CLI writes them (`result` after `args`)."""
    out: dict[str, Any] = {}
    for key, value in call.items():
        if key == "result":
            continue
        out[key] = value
        if key == "args":
            out["result"] = parts
    out.setdefault("result", parts)
    out["status"] = status
    return out


class GeminiCliSession(GeminiCli):
    """A legacy Gemini CLI session: one JSON document holding the message array.

    Written by gemini-cli before 0.39 (`chats/session-<time>-<id>.json`);
    the records are the JSONL format's, so is everything about pairing.
    """

    id = "gemini_cli_json"
    label = "Gemini CLI session JSON (legacy)"
    priority = 130
    jsonl = False
    array_keys = ("messages",)

    sniff = Format.sniff
    sniff_loose = Format.sniff_loose

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return CERTAIN for an object with `sessionId`, `projectHash` and `messages`."""
        sure = not loose and (
            isinstance(root, dict)
            and isinstance(root.get("sessionId"), str)
            and "projectHash" in root
            and isinstance(root.get("messages"), list)
        )
        return CERTAIN if sure else 0.0


# How the timeline shows Gemini CLI messages (display.py runs the rules of every format).


@message_rule(80)
def _thoughts(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show each of a message's `thoughts` (subject, then description) as thinking."""
    thoughts = node.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else ():
        if isinstance(thought, dict):
            text = "\n".join(str(thought[k]) for k in ("subject", "description") if thought.get(k))
            out.append(Shown(ShownKind.THINKING, cut(text)))
    return False


@message_rule(45)
def _tool_calls(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show a message's `toolCalls`, each with the `result` it carries."""
    show_calls(node.get("toolCalls"), out, depth)
    return False
