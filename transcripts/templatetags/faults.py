"""Template filters about fault kinds."""

from __future__ import annotations

import re

from django import template

from transcripts.core.model import FaultKind

register = template.Library()

# Kinds that report a fact rather than something to fix: shown as information, not as faults.
NOTES: dict[str, str] = {
    FaultKind.EXISTING_SYNTHETIC: "informational: synthesized by an earlier repair",
}


@register.filter
def fault_note(kind: str) -> str:
    """Return why the fault kind id `kind` is informational, or "" for a kind to fix."""
    return NOTES.get(kind, "")


# Bidirectional controls reorder the text around them: in a transcript they can make
# `gnp.exe` read as `exe.png`. Shown as visible code points instead.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@register.filter
def visible(text: object) -> str:
    """Return `text` with bidirectional control characters spelled out, e.g. "[U+202E]"."""
    return _BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(text))
