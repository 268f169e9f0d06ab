"""Gemini CLI resuming a session file: what it sends the Gemini API.

Modelled on @google/gemini-cli 0.61.0 (its bundled packages/core):

- `loadConversationRecord` (services/chatRecordingService.ts): lines that are
  not JSON are skipped; a message record (one with a string `id`) is kept by
  id, a later write replacing the earlier one in the earlier one's place (a JS
  `Map`); `{"$rewindTo": id}` removes that message and every later one (all of
  them when the id is unknown); `{"$set": {"messages": [...]}}` replaces them
  all. A legacy `.json` session is one document whose `messages` are read the
  same way (it is migrated to JSONL on resume).
- `convertSessionToClientHistory` (utils/sessionUtils.ts): `info`, `error` and
  `warning` messages are not sent, nor user messages that are empty or start
  with `/`, `?`, `<session_context>` or `<hook_context>`. A `gemini` message
  sends its thoughts, content and one `functionCall` per `toolCalls[]`; the
  calls whose `result` is set are answered in the next user turn (a string
  result as `{output}`, a list spread as parts, an object as is). A call with
  no result is sent unanswered whatever its `status`: the CLI has no recovery,
  the API answers 400.
- `GeminiChat`: a run of model turns holding an empty text part is left out
  (`extractCuratedHistory`); history that ends with tool responses gets a
  model turn "[The previous response was interrupted before it completed.]"
  before the new prompt (`closeUnansweredToolResponseTurn`); for Gemini 2 and
  later models thoughts are stripped and consecutive turns of one role merged
  (`coalesceConsecutiveRoles`).
"""

from __future__ import annotations

from typing import Any

from transcripts.core.model import Transcript
from transcripts.replay._request import message_text
from transcripts.replay.base import Dropped, Message, Preview, check_request, register

# The npm package and version whose code this model follows (the agent tier installs it).
PACKAGE = ("@google/gemini-cli", "0.61.0")
MODELLED_ON = " ".join(PACKAGE)

__all__ = ["INTERRUPTED", "preview"]

INTERRUPTED = "[The previous response was interrupted before it completed.]"
_IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")


def _load(transcript: Transcript) -> list[tuple[int, dict[str, Any]]]:
    """Return (record index, message) in the order the CLI's loader keeps them."""
    messages: dict[str, tuple[int, dict[str, Any]]] = {}
    for record in transcript.records:
        obj = record.obj
        if not isinstance(obj, dict):
            continue
        if isinstance(obj.get("$rewindTo"), str):
            ids = list(messages)
            start = ids.index(obj["$rewindTo"]) if obj["$rewindTo"] in messages else 0
            for uid in ids[start:]:
                del messages[uid]
        elif isinstance(obj.get("id"), str):
            messages[obj["id"]] = (record.index, obj)
        elif isinstance(obj.get("$set"), dict) and isinstance(obj["$set"].get("messages"), list):
            messages.clear()
            for msg in obj["$set"]["messages"]:
                if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                    messages[msg["id"]] = (record.index, msg)
        elif isinstance(obj.get("sessionId"), str) and isinstance(obj.get("messages"), list):
            for msg in obj["messages"]:
                if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                    messages[msg["id"]] = (record.index, msg)
    return list(messages.values())


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    if isinstance(content, str):
        return [{"text": content}]
    return [content]


def _text(content: Any) -> str:
    """Return the text of a content value the way `partListUnionToString` reads it."""
    return "".join(
        str(p.get("text", "")) for p in _parts(content) if isinstance(p, dict) and "text" in p
    )


def _history(
    messages: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, str, list[Any]]]:
    """Return (record, role, parts) turns as `convertSessionToClientHistory` builds them."""
    turns: list[tuple[int, str, list[Any]]] = []
    for index, msg in messages:
        kind = msg.get("type")
        if kind == "user":
            text = _text(msg.get("content")).strip()
            if not text or text.startswith(_IGNORED_PREFIXES):
                continue
            turns.append((index, "user", _parts(msg.get("content"))))
        elif kind == "gemini":
            content = _parts(msg.get("content")) if msg.get("content") else []
            written = msg.get("toolCalls")
            calls = [c for c in written if isinstance(c, dict)] if isinstance(written, list) else []
            in_content = any(
                isinstance(p, dict) and (p.get("functionCall") or p.get("thought")) for p in content
            )
            parts: list[Any] = []
            if in_content:
                parts.extend(content)
            else:
                for thought in msg.get("thoughts") or []:
                    if isinstance(thought, dict):
                        parts.append({"text": str(thought.get("description", "")), "thought": True})
                parts.extend(content)
                parts.extend(
                    {
                        "functionCall": {
                            "id": c.get("id"),
                            "name": c.get("name"),
                            "args": c.get("args"),
                        }
                    }
                    for c in calls
                )
            if not parts:
                continue
            turns.append((index, "model", parts))
            responses: list[Any] = []
            for call in calls:
                result = call.get("result")
                if not result:
                    continue
                if isinstance(result, str):
                    responses.append(
                        {"functionResponse": {"id": call.get("id"), "name": call.get("name")}}
                    )
                elif isinstance(result, list):
                    responses.extend(_parts(result))
                else:
                    responses.append(result)
            if responses:
                turns.append((index, "user", responses))
    return turns


def _valid(parts: list[Any]) -> bool:
    """Return False for a turn the CLI's curated history leaves out (`isValidContent`)."""
    for part in parts:
        if not isinstance(part, dict) or not part:
            return False
        others = [k for k in part if k not in ("text", "thought", "callIndex")]
        if not part.get("thought") and part.get("text") == "" and not others:
            return False
    return True


def _message(role: str, parts: list[Any]) -> Message:
    texts, calls, results = [], [], []
    for part in parts:
        if not isinstance(part, dict) or part.get("thought"):
            continue
        if message_text(part.get("text")):
            texts.append(message_text(part["text"]))
        # A call or response without an id is named by its function, as request_messages does.
        if isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            calls.append(str(call.get("id") or call.get("name")))
        if isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"]
            results.append(str(response.get("id") or response.get("name")))
    return Message(
        "assistant" if role == "model" else "user", tuple(texts), tuple(calls), tuple(results)
    )


@register("gemini_cli_json")
@register("gemini_cli")
def preview(transcript: Transcript) -> Preview:
    """Return what Gemini CLI sends `gemini-2.5-pro` on resuming `transcript`."""
    turns = _history(_load(transcript))
    dropped: list[Dropped] = []
    curated: list[tuple[str, list[Any]]] = []
    k = 0
    while k < len(turns):
        if turns[k][1] == "user":
            curated.append((turns[k][1], turns[k][2]))
            k += 1
            continue
        run = []
        while k < len(turns) and turns[k][1] == "model":
            run.append(turns[k])
            k += 1
        if all(_valid(parts) for _, _, parts in run):
            curated.extend((role, parts) for _, role, parts in run)
        else:
            for index, _, parts in run:
                reason = "Gemini CLI leaves out a model turn with an empty text part"
                for call in _message("model", parts).calls:
                    dropped.append(Dropped(index, "call", reason, call))
                dropped.append(Dropped(index, "record", reason))
    added: list[Message] = []
    if (
        turns
        and turns[-1][1] == "user"
        and any(isinstance(p, dict) and p.get("functionResponse") for p in turns[-1][2])
    ):
        placeholder = ("model", [{"text": INTERRUPTED}])
        curated.append(placeholder)
        added.append(_message(*placeholder))
    merged: list[tuple[str, list[Any]]] = []
    for role, parts in curated:
        kept = [p for p in parts if not (isinstance(p, dict) and p.get("thought"))]
        if merged and merged[-1][0] == role:
            merged[-1] = (role, merged[-1][1] + kept)
        else:
            merged.append((role, kept))
    body = {"contents": [{"role": role, "parts": parts} for role, parts in merged]}
    violations = check_request("gemini", body) if merged else []
    messages = [_message(role, parts) for role, parts in merged]
    return Preview("Gemini CLI", "gemini", messages, violations, dropped, added, MODELLED_ON)
