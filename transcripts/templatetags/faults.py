"""Template filters about fault kinds."""

from __future__ import annotations

from django import template

from transcripts.core.model import FaultKind
from transcripts.formats import label
from transcripts.visible import page_text

register = template.Library()

# Kinds that report a fact rather than something to fix: shown as information, not as faults.
NOTES: dict[str, str] = {
    FaultKind.EXISTING_SYNTHETIC: "informational: synthesized by an earlier repair",
}


# What each fault kind means (DESIGN.md), for the legends.
MEANINGS: dict[str, str] = {
    FaultKind.MISSING_RESULT: "a tool call that no result answers",
    FaultKind.PENDING_RESULT: "an unanswered call at the tail of a session still being written",
    FaultKind.ORPHANED_RESULT: "a result whose call is not on the live branch",
    FaultKind.DUPLICATE_RESULT: "a second result for a call that already has one",
    FaultKind.DUPLICATE_CALL_ID: "two calls sharing one id where the provider needs them unique",
    FaultKind.DISPLACED_RESULT: "answered, but not where the provider requires",
    FaultKind.MISORDERED_RESULTS: "a turn's results not in call order",
    FaultKind.RESULT_NOT_FIRST: "text before the tool results in the user message",
    FaultKind.CONTENT_AFTER_CALL: "assistant content after a tool call in the same message",
    FaultKind.ABORTED_FRAME: "an errored or aborted assistant turn that carries tool calls",
    FaultKind.MALFORMED_CALL: "a call with no id, a bad name or id, or partial arguments",
    FaultKind.MALFORMED_RECORD: "a line or element that is not valid JSON",
    FaultKind.EXISTING_SYNTHETIC: "a result an earlier repair synthesized",
    FaultKind.ORPHANED_REASONING: "a Responses reasoning item without the item it produced",
    FaultKind.PARENT_LOOP: "parent links that lead the agent's branch walk round a loop",
}


@register.filter
def fault_meaning(kind: str) -> str:
    """Return what the fault kind id `kind` means, in a few words ("" for an unknown id)."""
    return MEANINGS.get(kind, "")


@register.filter
def fault_note(kind: str) -> str:
    """Return why the fault kind id `kind` is informational, or "" for a kind to fix."""
    return NOTES.get(kind, "")


# Bidirectional controls reorder the text around them: in a transcript they can make
# `gnp.exe` read as `exe.png`; controls show as nothing. Both are spelled out instead.
@register.filter
def visible(text: object) -> str:
    """Return `text` with bidi controls ("[U+202E]") and other controls ("\\x1b") spelled out."""
    return page_text(str(text))


@register.filter
def format_name(format_id: str) -> str:
    """Return a format id's label ("Claude Code JSONL"; "Unknown format" for "unknown")."""
    return label(format_id)
