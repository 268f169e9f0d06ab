"""OpenHands V1 SDK events, as one JSON array, formats.md §8.4.

Events are discriminated by `kind`. An `ActionEvent` is a tool call
(`tool_call_id`, `tool_call{id, name, arguments}`; parallel calls share
`llm_response_id`); an `ObservationEvent`, `UserRejectObservation` or
`AgentErrorEvent` with the same `tool_call_id` answers it. OpenHands turns the
events into Chat Completions messages, so those rules apply.
"""

from __future__ import annotations

from typing import Any

from transcripts.core.model import Op, Record, Role, ToolResult, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    LIKELY,
    Format,
    MessageSniff,
    Placed,
    add_call,
    canonical,
    digest,
    preview,
)
from transcripts.formats.display import (
    Shown,
    call_id,
    envelope,
    member_call,
    message_rule,
    show_result,
    walk,
)


def _event(e: Any) -> bool:
    """Return True for an event of a `...Event` kind, or a rejection."""
    return (
        isinstance(e, dict)
        and str(e.get("kind", "")).endswith("Event")
        or isinstance(e, dict)
        and e.get("kind") == "UserRejectObservation"
    )


_RESULTS = ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
_INTERRUPTED = "The action was interrupted before it returned an observation."


class OpenHands(Format):
    id = "openhands"
    label = "OpenHands V1 events"
    priority = 40
    jsonl = False
    provider = "openai_chat"
    native_text = _INTERRUPTED

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return LIKELY for an array of events, each of a `...Event` kind (or a rejection)."""
        if loose or not isinstance(root, list):
            return 0.0
        return MessageSniff(None, LIKELY, every=(_event,))

    def classify(self, obj: Any, record: Record) -> None:
        kind = str(obj.get("kind"))
        record.kind = kind
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        if kind == "ActionEvent":
            record.role = Role.ASSISTANT
            call = obj.get("tool_call") if isinstance(obj.get("tool_call"), dict) else {}
            call_id = obj.get("tool_call_id") or call.get("id")
            name = obj.get("tool_name") or call.get("name")
            args = call.get("arguments")
            if isinstance(obj.get("llm_response_id"), str):
                record.message_id = obj["llm_response_id"]
            thought = obj.get("thought")
            # The thought belongs to the action: the event is kept or dropped whole.
            add_call(record, 0, call_id, name, args)
            record.text = preview(f"{preview(thought)} {name}({preview(canonical(args), 120)})")
        elif kind in _RESULTS:
            record.role = Role.TOOL
            body = obj.get("observation") or obj.get("rejection_reason") or obj.get("error")
            text = preview(body)
            record.results.append(
                ToolResult(
                    str(obj.get("tool_call_id") or ""),
                    record.index,
                    0,
                    kind != "ObservationEvent",
                    text,
                )
            )
            record.text = text
        elif kind == "MessageEvent":
            message = obj.get("llm_message") if isinstance(obj.get("llm_message"), dict) else {}
            role = message.get("role", obj.get("source"))
            record.role = Role.ASSISTANT if role in ("assistant", "agent") else Role.USER
            record.other_blocks = 1
            record.text = preview(message.get("content"))
        else:
            record.role = Role.META
            record.text = preview(obj.get("source") or "")

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        action = transcript.records[op.call.record].obj
        sibling = next((r.obj for r in transcript.records if r.kind == "AgentErrorEvent"), None)
        event = {
            "kind": "AgentErrorEvent",
            "id": "ev-" + digest(action.get("id"), op.call.id, op.kind)[:12],
            "timestamp": action.get("timestamp"),
            "source": "agent",
            "tool_name": op.call.name,
            "tool_call_id": op.call.id,
            "error": op.text,
        }
        return ordered_like(sibling, event)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        raise ValueError("OpenHands events hold one result each; they move whole")

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        raise ValueError("OpenHands events are kept or dropped whole")

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        obj["tool_call_id"] = new_id
        if isinstance(obj.get("tool_call"), dict):
            obj["tool_call"]["id"] = new_id


# How the timeline shows OpenHands events (display.py runs the rules of every format).
envelope("llm_message", 30)


@message_rule(60)
def _thought(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show an action's `thought` (text or text blocks)."""
    if "thought" in node and isinstance(node["thought"], list | str):
        walk(node["thought"], out, depth + 1)
    return False


member_call("tool_call", 35)


@message_rule(30)
def _observation(node: dict[str, Any], out: list[Shown], depth: int) -> bool:
    """Show an observation event's `observation` as the result of its `tool_call_id`."""
    if isinstance(node.get("observation"), dict):
        show_result(node["observation"], out, call_id(node) if "tool_call_id" in node else "")
    return False
