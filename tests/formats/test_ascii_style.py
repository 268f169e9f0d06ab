"""New and rewritten records are written in UTF-8 unless the file shows it escapes non-ASCII.

Claude Code and pi write with JavaScript's `JSON.stringify`, Codex with serde_json: both
write non-ASCII text as UTF-8. A session whose first record happens to be ASCII used to
have its rewritten records escape every non-ASCII character (`\\u2192`), unlike the agent.
"""

from __future__ import annotations

import json

from transcripts.engine import analyze
from transcripts.formats import load


def _session(first_text: str, ensure_ascii: bool) -> bytes:
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s",
            "message": {"role": "user", "content": first_text},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Lecture du fichier → café"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "é"}},
                ],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "sessionId": "s",
            "message": {"role": "user", "content": "et ensuite ? ✓"},
        },
    ]
    return b"".join(json.dumps(line, ensure_ascii=ensure_ascii).encode() + b"\n" for line in lines)


def test_an_ascii_first_record_shows_nothing_and_new_records_are_utf8() -> None:
    data = _session("hello", ensure_ascii=False)
    assert not load(data, "s.jsonl").style.element.ensure_ascii
    analysis = analyze(data, "s.jsonl", "synthesize", grace=0)
    assert analysis.fault_counts == {"missing_result": 1}
    last = json.loads(analysis.repaired.splitlines()[-1])
    assert last["uuid"] == "u2" and last["parentUuid"] != "a1"  # rewritten, re-parented
    assert b"\\u" not in analysis.repaired
    assert "et ensuite ? ✓".encode() in analysis.repaired


def test_a_first_record_that_escapes_non_ascii_is_followed() -> None:
    data = _session("héllo", ensure_ascii=True)
    assert load(data, "s.jsonl").style.element.ensure_ascii
    repaired = analyze(data, "s.jsonl", "synthesize", grace=0).repaired
    assert repaired.isascii()


def test_an_escaped_backslash_before_a_u_is_no_escape() -> None:
    data = _session("C:\\users\\u00e9", ensure_ascii=True)  # the text holds `\u00e9` itself
    assert not load(data, "s.jsonl").style.element.ensure_ascii
