"""Template filters about fault kinds."""

from __future__ import annotations

from django import template

from transcripts.core.model import FaultKind

register = template.Library()

# Kinds that report a fact rather than something to fix: shown as information, not as faults.
INFORMATIONAL: dict[str, str] = {
    FaultKind.EXISTING_SYNTHETIC: "informational: synthesized by an earlier repair",
}


@register.filter
def fault_note(kind: str) -> str:
    """Return why the fault kind id `kind` is informational, or "" for a kind to fix."""
    return INFORMATIONAL.get(kind, "")
