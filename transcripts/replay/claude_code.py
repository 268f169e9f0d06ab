"""What Claude Code (`@anthropic-ai/claude-code` 2.1.328) sends on `claude -p --resume <id>`.

Claude Code loads the session file, walks the `parentUuid` chain back from the
last entry (from the last `compact_boundary` on), turns the entries into
Messages API messages and repairs the pairing itself before it sends them,
followed by the new prompt. As observed against the real CLI:

- a tool result whose entry is parented on its own `tool_use` line (parallel
  calls) is re-attached after its call's message, though the chain walk
  misses it (`core.branch.live_path` does the same);
- the assistant line it writes for a failed request (`isApiErrorMessage`,
  model `<synthetic>`) is not sent;
- entries split from one API response (one `message.id`) join into one
  assistant message; consecutive user entries join into one user message,
  tool results first; a `local_command` system entry is user text;
- a tool result that answers no call of the assistant message right before it
  is dropped (orphans, duplicates, late results), and a user message left
  with nothing holds "(no content)"; an entry whose `content` is an empty
  list is not sent when it is a user one, and says "(no content)" when it is
  an assistant one;
- a call with no result right after it: when its result comes later, Claude
  Code writes "[Tool result missing due to internal error]" in its place;
  when it is the last thing in the file, an interrupted result; otherwise it
  drops the call (and its message when nothing else is left);
- a second `tool_use` with an id already used is removed (an assistant
  message left with nothing says "[Tool use interrupted]"); when the
  conversation opens on tool results alone, its first message says "[Orphaned
  tool result removed due to conversation resume]";
- in a file whose entries carry no `uuid` at all, only the last entry is sent;
- when the last user or assistant entry is a user one (a prompt or a tool
  result, or an empty one; not when a failed request's line follows it), it
  adds an assistant "No response requested." after it (local command output
  written after that entry follows it).

Source: the request the real CLI sends on each shape above (the agent tier,
`tests/agents/test_claude_code.py`, checks this model against it), and the
pairing repair (`ensureToolResultPairing`) in the JavaScript bundle the
package ships.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transcripts.core.branch import live_context
from transcripts.core.model import Record, Role, Transcript
from transcripts.replay._request import request_messages
from transcripts.replay.base import Dropped, Message, Preview, check_request, register

# The npm package and version whose code this model follows (the agent tier installs it).
PACKAGE = ("@anthropic-ai/claude-code", "2.1.328")
MODELLED_ON = " ".join(PACKAGE)

NO_RESPONSE = "No response requested."
SYNTHETIC_MODEL = "<synthetic>"
NO_CONTENT = "(no content)"
MISSING = "[Tool result missing due to internal error]"
INTERRUPTED_CALL = "[Tool use interrupted]"
REMOVED_CALL = "[Tool use removed]"
ORPHANED = "[Orphaned tool result removed due to conversation resume]"
ENDED = (
    "[Tool call interrupted: the session ended before this call's result was recorded, so its "
    "outcome is unknown. Check whether it took effect before relying on it or running it again.]"
)


@dataclass
class _Part:
    """One content block and where it came from (record index, block index; -1: added)."""

    block: dict[str, Any]
    record: int
    index: int


@dataclass
class _Message:
    role: str
    parts: list[_Part] = field(default_factory=list)
    message_id: str | None = None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _messages(transcript: Transcript, path: list[int]) -> list[_Message]:
    out: list[_Message] = []
    for index in path:
        record = transcript.records[index]
        obj = record.obj
        if not isinstance(obj, dict):
            continue
        kind = obj.get("type")
        message: dict[str, Any] = obj["message"] if isinstance(obj.get("message"), dict) else {}
        if _is_api_error(obj):
            continue
        if kind == "assistant":
            parts = [_Part(b, index, j) for j, b in enumerate(_blocks(message.get("content")))]
            if message.get("content") == []:
                parts = [_Part({"type": "text", "text": NO_CONTENT}, index, -1)]
            last = out[-1] if out else None
            if (
                last is not None
                and last.role == "assistant"
                and last.message_id == record.message_id
            ):
                last.parts.extend(parts)
            else:
                out.append(_Message("assistant", parts, record.message_id))
            continue
        if kind == "user":
            if _empty(obj):
                continue
            parts = [_Part(b, index, j) for j, b in enumerate(_blocks(message.get("content")))]
        elif _is_local_command(obj):
            parts = [_Part(b, index, 0) for b in _blocks(obj.get("content"))]
        else:
            continue
        if out and out[-1].role == "user":
            out[-1].parts.extend(parts)
        else:
            out.append(_Message("user", parts))
    return out


def _empty(obj: Any) -> bool:
    """Return True for a user entry whose `content` is an empty list (it is not sent)."""
    message = obj.get("message") if isinstance(obj, dict) else None
    return (
        isinstance(obj, dict)
        and obj.get("type") == "user"
        and isinstance(message, dict)
        and message.get("content") == []
    )


def _entry(record: Record) -> bool:
    """Return True for a user or assistant entry (a failed request's line counts)."""
    return record.role in (Role.USER, Role.ASSISTANT) or _is_api_error(record.obj)


def _is_api_error(obj: Any) -> bool:
    """Return True for the assistant line Claude Code writes when a request failed."""
    return (
        isinstance(obj, dict)
        and obj.get("type") == "assistant"
        and obj.get("isApiErrorMessage") is True
        and isinstance(obj.get("message"), dict)
        and obj["message"].get("model") == SYNTHETIC_MODEL
    )


def _is_local_command(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "local_command"


def _thinking(part: _Part) -> bool:
    return _is(part, "thinking") or _is(part, "redacted_thinking")


def _is(part: _Part, kind: str) -> bool:
    return part.block.get("type") == kind


def _merge_users(messages: list[_Message]) -> list[_Message]:
    out: list[_Message] = []
    for message in messages:
        if out and message.role == "user" and out[-1].role == "user":
            out[-1].parts.extend(message.parts)
        else:
            out.append(message)
    return out


def _result(call_id: str, text: str) -> _Part:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": True}
    return _Part(block, -1, -1)


@register("claude_code")
def claude_code(transcript: Transcript) -> Preview:
    """Return what Claude Code sends on resuming `transcript` (a `claude_code` session).

    `dropped` lists the calls, results and texts Claude Code leaves out;
    `added` what it writes in itself (results in place of missing ones,
    "No response requested.").
    """
    path = live_context(transcript)
    dropped: list[Dropped] = []
    entries = [r.index for r in transcript.records if r.role in (Role.USER, Role.ASSISTANT)]
    if entries and all(transcript.records[i].uid is None for i in entries):
        # Entries without `uuid` all land on one key of the chain walk: only the
        # last one is left to send.
        path = entries[-1:]
        dropped = [
            Dropped(i, "record", "no uuid: the chain walk reaches only the last entry")
            for i in entries[:-1]
        ]
    # Local command output after the last user or assistant entry stays after
    # the "No response requested." that Claude Code puts after that entry.
    end = len(path)
    while end > 0 and not _entry(transcript.records[path[end - 1]]):
        end -= 1
    messages = _messages(transcript, path[:end])
    added: list[Message] = []
    later: dict[str, int] = {}  # call id -> the last message holding a result for it
    for k, message in enumerate(messages):
        for part in message.parts:
            if _is(part, "tool_result"):
                later[str(part.block.get("tool_use_id"))] = k
    seen_calls: set[str] = set()
    for k, message in enumerate(messages):
        if message.role != "assistant":
            continue
        kept: list[_Part] = []
        parts = message.parts
        for j, part in enumerate(parts):
            call_id = str(part.block.get("id"))
            if _is(part, "tool_use") and call_id in seen_calls:
                dropped.append(Dropped(part.record, "call", "tool_use id used twice", call_id))
                if j and j + 1 < len(parts) and _thinking(parts[j - 1]) and _thinking(parts[j + 1]):
                    kept.append(_Part({"type": "text", "text": REMOVED_CALL}, part.record, -1))
                continue
            if _is(part, "tool_use"):
                seen_calls.add(call_id)
            kept.append(part)
        message.parts = kept or [_Part({"type": "text", "text": INTERRUPTED_CALL}, -1, -1)]
        calls = [str(p.block.get("id")) for p in kept if _is(p, "tool_use")]
        following = messages[k + 1] if k + 1 < len(messages) else None
        here = (
            {str(p.block.get("tool_use_id")) for p in following.parts if _is(p, "tool_result")}
            if following is not None and following.role == "user"
            else set()
        )
        synthetic: list[_Part] = []
        for call_id in calls:
            if call_id in here:
                continue
            if later.get(call_id, -1) > k:
                synthetic.append(_result(call_id, MISSING))
            elif following is None:
                synthetic.append(_result(call_id, ENDED))
            else:
                part = next(p for p in message.parts if str(p.block.get("id")) == call_id)
                message.parts.remove(part)
                dropped.append(
                    Dropped(part.record, "call", "unanswered tool_use dropped on resume", call_id)
                )
        if synthetic:
            for part in synthetic:
                text = str(part.block["content"])
                added.append(Message("user", (text,), results=(str(part.block["tool_use_id"]),)))
            if following is not None and following.role == "user":
                following.parts[:0] = synthetic
            else:
                messages.insert(k + 1, _Message("user", synthetic))
    _drop_unpaired_results(messages, dropped)
    messages = [
        m
        for m in messages
        if m.role == "user"
        or any(not _is(p, "thinking") and not _is(p, "redacted_thinking") for p in m.parts)
    ]
    messages = _merge_users(messages)
    for message in messages:
        if message.role == "user":
            message.parts.sort(key=lambda p: not _is(p, "tool_result"))
            if not message.parts:
                # The first message has no call before it to pair with.
                text = ORPHANED if message is messages[0] else NO_CONTENT
                message.parts = [_Part({"type": "text", "text": text}, -1, -1)]
    last = transcript.records[path[end - 1]].obj if end > 0 else None
    # An empty user entry at the end is not sent, but it is the user entry the answer
    # follows: the answer then comes right after the assistant message before it.
    ends_on_user = (bool(messages) and messages[-1].role == "user") or _empty(last)
    if ends_on_user and not _is_api_error(last):
        messages.append(
            _Message("assistant", [_Part({"type": "text", "text": NO_RESPONSE}, -1, -1)])
        )
        added.append(Message("assistant", (NO_RESPONSE,)))
    messages = _merge_users([*messages, *_messages(transcript, path[end:])])
    body = {"messages": [{"role": m.role, "content": [p.block for p in m.parts]} for m in messages]}
    return Preview(
        agent="Claude Code",
        provider="anthropic",
        messages=request_messages("anthropic", body),
        violations=check_request("anthropic", body),
        dropped=dropped,
        added=added,
        modelled_on=MODELLED_ON,
    )


def _drop_unpaired_results(messages: list[_Message], dropped: list[Dropped]) -> None:
    """Drop each result that answers no call of the assistant message right before it."""
    answered: set[str] = set()
    for k, message in enumerate(messages):
        if message.role != "user":
            continue
        before = messages[k - 1] if k > 0 and messages[k - 1].role == "assistant" else None
        calls = (
            {str(p.block.get("id")) for p in before.parts if _is(p, "tool_use")}
            if before is not None
            else set()
        )
        kept: list[_Part] = []
        for part in message.parts:
            if not _is(part, "tool_result"):
                kept.append(part)
                continue
            call_id = str(part.block.get("tool_use_id"))
            if call_id in calls and call_id not in answered:
                answered.add(call_id)
                kept.append(part)
            else:
                why = "duplicate" if call_id in answered else "of no call right before it"
                dropped.append(
                    Dropped(part.record, "result", f"tool_result {why} dropped", call_id)
                )
        message.parts = kept
