"""Byte-faithful export: a file's quirks survive a repair (formats.md §0.5)."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import sessions
from transcripts.engine import analyze
from transcripts.formats import load

BOM = b"\xef\xbb\xbf"


def _quirky(value: object) -> object:
    """Add values whose spelling a re-serializer would change."""
    if isinstance(value, dict):
        out = {k: _quirky(v) for k, v in value.items()}
        if "role" in out or "type" in out:
            out["score"] = 1.0
            out["big"] = 1e21
            out["note"] = "café/naïve"
        return out
    if isinstance(value, list):
        return [_quirky(v) for v in value]
    return value


@st.composite
def jsonl_files(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(["claude_code", "openclaw", "codex"]))
    script = draw(sessions.scripts())
    lines = getattr(sessions, name)(script).decode().splitlines()
    ascii_only = draw(st.booleans())
    escape_slashes = draw(st.booleans())
    out = []
    for line in lines:
        text = json.dumps(_quirky(json.loads(line)), ensure_ascii=ascii_only, separators=(",", ":"))
        out.append(text.replace("/", "\\/") if escape_slashes else text)
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    body = eol.join(out) + (eol if draw(st.booleans()) else "")
    data = body.encode()
    return name + ".jsonl", (BOM + data) if draw(st.booleans()) else data


@st.composite
def json_files(draw: st.DrawFn) -> tuple[str, bytes]:
    builder = draw(st.sampled_from([sessions.openai_chat, sessions.anthropic]))
    script = draw(sessions.scripts())
    messages = _quirky(json.loads(builder(script)))
    indent = draw(st.sampled_from([None, 1, 2, 4]))
    ascii_only = draw(st.booleans())
    text = json.dumps(messages, indent=indent, ensure_ascii=ascii_only)
    data = text.encode() + (b"\n" if draw(st.booleans()) else b"")
    return "s.json", data


@settings(max_examples=150, deadline=None)
@given(file=jsonl_files())
def test_a_jsonl_files_line_ends_bom_and_spellings_survive_a_repair(
    file: tuple[str, bytes],
) -> None:
    name, data = file
    result = analyze(data, name)
    out = result.repaired
    if not result.plan:
        assert out == data
        return
    assert out.startswith(BOM) == data.startswith(BOM)
    # Each of these is an agent's file: its repair ends with a line end, so the line the
    # agent appends next starts on a line of its own.
    assert out.endswith(b"\n")
    crlf = b"\r\n" in data
    assert out.count(b"\n") == out.count(b"\r\n") if crlf else b"\r" not in out
    raw = load(data, name)
    spans = {data[r.start : r.end] for r in raw.records}
    repaired = load(out, name)
    for record in repaired.records:
        line = out[record.start : record.end]
        if line not in spans:
            # New or changed lines follow the file's style: compact separators, and
            # ASCII escapes when the file uses them.
            assert b'": ' not in line
            assert line.isascii() or b"\\u00e9" not in data
    assert not analyze(out, name).plan


@settings(max_examples=150, deadline=None)
@given(file=json_files())
def test_a_json_documents_indent_and_spellings_survive_a_repair(file: tuple[str, bytes]) -> None:
    name, data = file
    result = analyze(data, name)
    out = result.repaired
    assert out.endswith(b"\n") == data.endswith(b"\n")
    if not result.plan:
        assert out == data
        return
    raw = load(data, name)
    kept = [data[r.start : r.end] for r in raw.records]
    repaired = load(out, name)
    new = [out[r.start : r.end] for r in repaired.records if out[r.start : r.end] not in kept]
    # A new element's keys sit where the first element's keys sit (or all on one line).
    key_indent = re.search(rb"\n( +)\"", kept[0])
    for element in new:
        if key_indent is not None:
            assert re.search(rb"\n" + key_indent.group(1) + rb"\"", element)
        else:
            assert b"\n" not in element
    assert b"1e+21" in out and b"1.0" in out
    assert not analyze(out, name).plan


def test_a_codex_rollout_in_the_older_direct_layout_is_read_and_repaired() -> None:
    lines = [
        {"id": "s-1", "timestamp": "2025-05-01T10:00:00Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["ls"]}',
            "call_id": "call_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "a\nb"},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["pwd"]}',
            "call_id": "call_2",
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop"}]},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    result = analyze(data, "rollout-old.jsonl", "native")
    assert result.format == "codex"
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", "call_2", 5)
    ]
    out = result.repaired.splitlines()
    assert json.loads(out[6]) == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "aborted",
    }
    assert out[:6] == data.splitlines()[:6]
    assert not analyze(result.repaired, "rollout-old.jsonl").plan
