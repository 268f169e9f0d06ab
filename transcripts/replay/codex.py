"""What Codex CLI (`@openai/codex` 0.169.0) sends on `codex exec resume <id>`.

Codex rebuilds the conversation from the rollout's `response_item` lines (the
bare items of the older layout) and sends them as the Responses API `input`,
followed by the new turn (its instructions, the environment context, the
prompt). On the way:

- a `compacted` line replaces everything before it: by its
  `replacement_history` when it has one, else by the user messages written
  before it (the session prefix - environment context, user instructions -
  left out) and the summary as one more user message;
- an output whose call is nowhere in the history is dropped;
- a call with no output gets one written in right after it, `aborted`
  (`custom_tool_call_output` for a custom tool call); duplicate outputs are
  kept as they are.

A rollout of the older layout (a bare `{id, timestamp}` header, bare items)
does not open at all in 0.169.0 ("failed to read session metadata ... rollout
is empty"): its preview sends nothing and drops every item.

Source: observed against the real CLI by the agent tier
(`tests/agents/test_codex.py`), which checks this model against the request
Codex sends on every input of the tier; it matches Codex's `normalize.rs`
(`ensure_call_outputs_present`, `remove_orphan_outputs`).
"""

from __future__ import annotations

from typing import Any

from transcripts.core.model import Transcript
from transcripts.replay._request import request_messages
from transcripts.replay.base import Dropped, Message, Preview, check_request, register

# The npm package and version whose code this model follows (the agent tier installs it).
PACKAGE = ("@openai/codex", "0.169.0")
MODELLED_ON = " ".join(PACKAGE)

ABORTED = "aborted"
_CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "function_call_output",
}
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_ENVELOPES = ("session_meta", "turn_context", "event_msg", "compacted", "response_item")
_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


def _item(obj: Any, index: int) -> dict[str, Any] | None:
    """Return the Responses item a rollout line carries, or None."""
    if not isinstance(obj, dict):
        return None
    if obj.get("type") == "response_item":
        payload = obj.get("payload")
        return payload if isinstance(payload, dict) else None
    kind = obj.get("type")
    if index > 0 and "payload" not in obj and isinstance(kind, str) and kind not in _ENVELOPES:
        return obj  # the older layout: bare items after an {id, timestamp} header
    return None


def _user_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def _history(transcript: Transcript) -> list[tuple[int, dict[str, Any]]]:
    """Return (record index, item) of what Codex rebuilds, compactions applied."""
    history: list[tuple[int, dict[str, Any]]] = []
    for record in transcript.records:
        obj = record.obj
        if isinstance(obj, dict) and obj.get("type") == "compacted":
            payload: dict[str, Any] = obj["payload"] if isinstance(obj.get("payload"), dict) else {}
            replacement = payload.get("replacement_history")
            if isinstance(replacement, list):
                history = [(record.index, i) for i in replacement if isinstance(i, dict)]
                continue
            users = [
                (index, item)
                for index, item in history
                if item.get("type") == "message"
                and item.get("role") == "user"
                and not _user_text(item).lstrip().startswith(_PREFIXES)
            ]
            summary = {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": str(payload.get("message", ""))}],
            }
            history = [*users, (record.index, summary)]
            continue
        item = _item(obj, record.index)
        if item is not None:
            history.append((record.index, item))
    return history


@register("codex")
def codex(transcript: Transcript) -> Preview:
    """Return what Codex sends on resuming `transcript` (a `codex` rollout).

    `dropped` lists the outputs Codex leaves out; `added` the `aborted`
    outputs it writes in itself.
    """
    first = transcript.records[0].obj if transcript.records else None
    if not (isinstance(first, dict) and first.get("type") == "session_meta"):
        return Preview(
            agent="Codex",
            provider="openai_responses",
            modelled_on=MODELLED_ON,
            messages=[],
            dropped=[
                Dropped(r.index, "record", "Codex cannot open a rollout without session_meta")
                for r in transcript.records
                if _item(r.obj, r.index) is not None
            ],
        )
    history = _history(transcript)
    calls = {str(i.get("call_id")) for _, i in history if i.get("type") in _CALLS}
    answered = {str(i.get("call_id")) for _, i in history if i.get("type") in _OUTPUTS}
    items: list[dict[str, Any]] = []
    dropped: list[Dropped] = []
    added: list[Message] = []
    for index, item in history:
        kind = item.get("type")
        call_id = str(item.get("call_id"))
        if kind in _OUTPUTS and call_id not in calls:
            dropped.append(Dropped(index, "result", "output of no call dropped on resume", call_id))
            continue
        items.append(item)
        if kind in _CALLS and call_id not in answered:
            items.append({"type": _CALLS[str(kind)], "call_id": call_id, "output": ABORTED})
            added.append(Message("tool", (ABORTED,), results=(call_id,)))
            answered.add(call_id)
    body = {"input": items}
    return Preview(
        agent="Codex",
        provider="openai_responses",
        messages=request_messages("openai_responses", body),
        violations=check_request("openai_responses", body),
        dropped=dropped,
        added=added,
        modelled_on=MODELLED_ON,
    )
