"""Recognise tool results that an earlier repair synthesized, by their text.

Sources (integrity-semantics.md §1A A5, §1B B-1 and B-1a, §1C, §5.3; formats.md
§4 and §5): OpenClaw's repair sentence under its three brand prefixes,
OpenMAIC's interrupted receipt, pi's "No result provided" and steering text,
Claude Code's internal-error placeholder and Codex's "aborted".
"""

from __future__ import annotations

import re

OPENCLAW_SENTENCE = (
    "missing tool result in session history; inserted synthetic error result for transcript repair."
)
_OPENCLAW = re.compile(r"^\[(openclaw|clawdbot|moltbot)\] " + re.escape(OPENCLAW_SENTENCE))
_OPENMAIC = re.compile(r'^\{\s*"ok"\s*:\s*false\s*,\s*"error"\s*:\s*"interrupted"')

_EXACT = {
    "No result provided": "pi",
    "Skipped due to queued user message.": "pi steering",
    "[Tool result missing due to internal error]": "Claude Code",
    "aborted": "Codex",
}

# The first character of every marker above.
_FIRST = "[{NSa"


def may_be_marker(text: str) -> bool:
    """Return False when `text` cannot be a marker: its first character past whitespace starts none.

    A test of the first character only, whatever the text's length: what
    `synthetic_marker` recognises starts with one of `_FIRST` once whitespace
    is normalised. True for a text of whitespace alone (looked up as ever).
    """
    # The head first: a long text that opens with whitespace is not copied whole to strip it.
    head = text[:64].lstrip()
    return (head or text.lstrip())[:1] in _FIRST


def synthetic_marker(text: str) -> str | None:
    """Return which system synthesized a result with this text, or None for a real result.

    `text` is the result's text content (whitespace is normalised before matching).
    """
    if not may_be_marker(text):
        return None  # nearly every result: no marker starts as it does
    text = " ".join(text.split())
    match = _OPENCLAW.match(text)
    if match:
        brand = match.group(1)  # the names OpenClaw has gone by, each its own prefix
        return "OpenClaw" if brand == "openclaw" else f"OpenClaw, as [{brand}]"
    if _OPENMAIC.match(text):
        # Pairfix's own `synthesize` writes the same receipt (policy.INTERRUPTED_TEXT).
        return "OpenMAIC's receipt, which Pairfix's synthesize policy writes too"
    return _EXACT.get(text)
