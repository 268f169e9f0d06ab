"""Bad input gets a clear message naming the file, the line and the reason; never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcripts.engine import analyze

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples" / "formats"
CLAUDE = (SAMPLES / "claude_code.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "s.jsonl: line 1: the file is empty"),
        (b"\n \n", "s.jsonl: line 1: the file is empty"),
        (b"hello world\n", "s.jsonl: line 1: not JSON or JSON lines: column 1:"),
        (b'{"a": 1,\n "b": [1, 2', "s.jsonl: line 2: not valid JSON: column"),
        (b"[1, 2, 3]", "s.jsonl: line 1: unknown format: a JSON document of none of the formats"),
        (b'{"type":"x"}\n{"type":"y"}\n', "s.jsonl: line 1: unknown format: JSON lines"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "s.jsonl: line 1: not JSON or JSON lines"),
        (
            b'{"type": "x"}\n',
            "s.jsonl: line 1: unknown format: one JSON object, neither a line of a session's "
            "JSON lines nor a JSON document of the formats Pairfix reads",
        ),
        (b"\x1f\x8b\x08\x00\x00\x00", "s.jsonl: line 1: the file is gzip-compressed"),
        (b"PK\x03\x04\x14\x00", "s.jsonl: line 1: the file is a zip archive: extract"),
    ],
)
def test_an_unreadable_file_says_why(data: bytes, message: str) -> None:
    result = analyze(data, "s.jsonl")
    assert result.error is not None
    assert result.error.startswith(message)
    assert not result.repairable
    assert result.repaired == data


def test_a_truncated_last_line_is_a_malformed_record_and_the_rest_still_parses() -> None:
    data = CLAUDE[:-60]
    result = analyze(data, "claude_code.jsonl")
    assert result.error is None
    malformed = [f for f in result.faults if str(f.kind) == "malformed_record"]
    assert [(f.record, f.detail.split(": ")[:2]) for f in malformed] == [
        (10, ["claude_code.jsonl", "line 11"])
    ]
    assert "truncated last line" in malformed[0].detail
    # Kept verbatim, and ended: Claude Code appends its next line as JSON + "\n", which
    # an open last line would swallow (a trial lost the prompt it sent after resuming).
    assert result.repaired.endswith(data[-200:] + b"\n")
    again = analyze(result.repaired + b'{"type":"user"}\n', "claude_code.jsonl")
    assert [str(f.kind) for f in again.faults].count("malformed_record") == 1
    assert again.transcript is not None and again.transcript.records[-1].error is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"type": "user", "message": \xff\xfe}', "invalid UTF-8"),
        (b"42", "a JSON number, not an object"),
        (b"null", "a JSON null, not an object"),
        (b'"text"', "a JSON string, not an object"),
        (b"{not json}", "column 2"),
    ],
)
def test_a_bad_line_is_reported_with_its_line_and_kept_verbatim(line: bytes, reason: str) -> None:
    lines = CLAUDE.splitlines(keepends=True)
    data = b"".join(lines[:3] + [line + b"\n"] + lines[3:])
    result = analyze(data, "claude_code.jsonl")
    malformed = [f for f in result.faults if str(f.kind) == "malformed_record"]
    assert len(malformed) == 1
    assert malformed[0].detail.startswith("claude_code.jsonl: line 4: ")
    assert reason in malformed[0].detail
    assert malformed[0].error == ""
    assert line + b"\n" in result.repaired


def _chat(arguments: str) -> bytes:
    return json.dumps(
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    ).encode()


@pytest.mark.parametrize("depth", [900, 1000, 1020, 1100, 5000])
def test_deeply_nested_json_never_raises(depth: int) -> None:
    nested = "[" * depth + "]" * depth
    for data, name in [
        (f'[{{"role":"user","content":{nested}}}]'.encode(), "n.json"),
        (_chat('{"a":' * depth + "1" + "}" * depth), "c.json"),
        (
            b'{"type":"session","version":3,"id":"s"}\n'
            + f'{{"type":"message","id":"a","parentId":null,"message":{{"role":"user",'
            f'"content":{nested}}}}}\n'.encode(),
            "p.jsonl",
        ),
    ]:
        for policy in ("synthesize", "discard"):
            result = analyze(data, name, policy)
            assert result.error is None or name in result.error
            assert isinstance(result.rows, list)
