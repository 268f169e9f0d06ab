"""A Claude Code session whose tool result holds a lone surrogate escape, as Node writes one.

Node's string slicing can cut an emoji's surrogate pair; `JSON.stringify` writes
the half it keeps as `\\ud83d`. The session is demo/samples/formats/claude_code.jsonl,
whose one fault is the interrupted call of line 9 (record 8), with such an escape
in the first tool result (line 6).
"""

from __future__ import annotations

from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "demo" / "samples" / "formats" / "claude_code.jsonl"
CUT = b'"content":"1 failed, 9 \\ud83d","is_error"'


def session() -> bytes:
    """Return the session's bytes; its line 6 (index 5) holds `\\ud83d`."""
    data = SAMPLE.read_bytes()
    cut = data.replace(b'"content":"1 failed, 9 passed","is_error"', CUT)
    assert cut != data
    return cut


def with_text_before_call() -> bytes:
    """Return the session with a text block holding `\\udc00` before the orphaned call."""
    call = b'"content":[{"type":"tool_use","id":"toolu_01CCCCCCCCCCCCCCCCCCCCCC"'
    data = session()
    assert call in data
    return data.replace(call, b'"content":[{"type":"text","text":"cut \\udc00 here"},' + call[11:])
