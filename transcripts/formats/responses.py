"""OpenAI Responses API input items: a JSON array or `{"input": [...]}`, formats.md §3.

Each element is one item: a `message`, a `reasoning` item, a call
(`function_call`, `custom_tool_call`, `local_shell_call`) or its output
(`*_output`). An output names its call by `call_id`, never by the item `id`
(`fc_…`), and may come anywhere after the call: the API only wants every call
answered once, after it, and no output without a call.

These items are exactly what a Codex rollout line carries as its
`response_item` payload (§5), so they are read by the Codex format; only the
document shape and the new records differ.
"""

from __future__ import annotations

from typing import Any

from transcripts.core.model import Op, Record, Role, Transcript
from transcripts.formats._json import ordered_like
from transcripts.formats.base import SPECIFIC, Format, MessageSniff
from transcripts.formats.codex import Codex

# Item types that only a Responses input holds (§9). Chat Completions messages
# carry no `type`; LangChain's carry `human`/`ai`/...
_ITEM_TYPES = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "reasoning",
    }
)
_PART_TYPES = frozenset({"input_text", "output_text"})


def _typed(value: Any, types: frozenset[str]) -> bool:
    """Return True when `value` is an object whose `type` is one of `types`."""
    kind = value.get("type") if isinstance(value, dict) else None
    # A hostile file may give any JSON as `type`; only strings can be looked up.
    return isinstance(kind, str) and kind in types


def _is_item(item: Any) -> bool:
    if _typed(item, _ITEM_TYPES):
        return True
    content = item.get("content") if isinstance(item, dict) else None
    return isinstance(content, list) and any(_typed(part, _PART_TYPES) for part in content)


class Responses(Codex):
    id = "responses"
    label = "OpenAI Responses input items"
    priority = 100
    jsonl = False
    agent = False  # a request body, not a file Codex writes
    malformed_note = Format.malformed_note

    sniff = Format.sniff
    sniff_loose = Format.sniff_loose

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return SPECIFIC for an object with an `input` array, or an array of Responses items."""
        if loose:
            return 0.0
        if isinstance(root, dict):
            sure = isinstance(root.get("input"), list) and "messages" not in root
            return SPECIFIC if sure else 0.0
        return MessageSniff(None, SPECIFIC, some=(_is_item,)) if isinstance(root, list) else 0.0

    def continues(self, root: Any) -> bool:
        """Return True for a request with `previous_response_id` or `conversation` set.

        Its outputs may answer calls of the stored response, which the request
        does not repeat (the Responses API's conversation state).
        """
        return isinstance(root, dict) and bool(
            root.get("previous_response_id") or root.get("conversation")
        )

    def classify(self, obj: Any, record: Record) -> None:
        """Classify one input item as Codex classifies its `response_item` lines.

        An input message may leave out `"type": "message"` (the SDK's "easy"
        input message); it is read as a message. An item whose `type` is not a
        string is no item the API knows: it is left out of pairing.
        """
        item = obj if "type" in obj or "role" not in obj else dict(obj, type="message")
        if not isinstance(item.get("type"), str):
            record.kind = "unknown"
            record.role = Role.META
            return
        super().classify({"type": "response_item", "payload": item}, record)

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return `{"type": "function_call_output", "call_id": ID, "output": TEXT}`.

        A custom tool call gets a `custom_tool_call_output`; a local shell call
        a `function_call_output`, as Codex answers one (normalize.rs, §5).
        Keys follow an existing output item of the same type.
        """
        assert op.call is not None
        call = transcript.records[op.call.record].obj
        kind = (
            "custom_tool_call_output"
            if call.get("type") == "custom_tool_call"
            else "function_call_output"
        )
        sibling = next(
            (r.obj for r in transcript.records if r.results and r.obj.get("type") == kind), None
        )
        return ordered_like(sibling, {"type": kind, "call_id": op.call.id, "output": op.text})
