"""Each sample session of demo/samples/formats: sniffed, its orphan found, repaired validly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcripts.core.validate import validate
from transcripts.engine import PRESETS, analyze
from transcripts.formats import load

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"

ORPHANS = {
    "claude_code.jsonl": ("claude_code", "toolu_01CCCCCCCCCCCCCCCCCCCCCC", 8),
    "openclaw.jsonl": ("openclaw", "toolu_01QQQQQQQQQQQQQQQQQQQQQQ", 7),
    "codex_rollout.jsonl": ("codex", "call_CCCCCCCCCCCCCCCCCCCCCC02", 13),
    "openhands_v1_events.json": ("openhands", "call_OOOOOOOOOOOOOOOOOOOOOO02", 3),
    "openai_chat.json": ("openai_chat", "call_CCCCCCCCCCCCCCCCCCCCCCCC", 6),
    "anthropic_messages.json": ("anthropic", "toolu_01CCCCCCCCCCCCCCCCCCCCCC", 3),
    "cline_api_conversation_history.json": ("cline", "toolu_01LLLLLLLLLLLLLLLLLLLLLL", 3),
}


@pytest.mark.parametrize("name", sorted(ORPHANS))
def test_it_finds_the_orphaned_call(name: str) -> None:
    data = (SAMPLES / "formats" / name).read_bytes()
    result = analyze(data, name)
    fmt, call_id, record = ORPHANS[name]
    assert result.format == fmt
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", call_id, record)
    ]
    assert call_id in result.faults[0].error


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(ORPHANS))
def test_repaired_sample_passes_the_providers_pairing_rules(name: str, policy: str) -> None:
    data = (SAMPLES / "formats" / name).read_bytes()
    repaired = analyze(data, name, policy).repaired
    assert repaired != data
    transcript = load(repaired, name)
    assert validate(transcript) == []
    assert not analyze(repaired, name, policy).plan


def test_claude_code_repair_inserts_one_line_and_repoints_its_child() -> None:
    data = (SAMPLES / "formats" / "claude_code.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    out = analyze(data, "claude_code.jsonl").repaired.splitlines(keepends=True)
    assert len(out) == len(lines) + 1
    assert out[:9] == lines[:9]
    assert out[11:] == lines[10:]
    inserted = json.loads(out[9])
    call_line = json.loads(lines[8])
    assert inserted["parentUuid"] == call_line["uuid"]
    assert inserted["message"]["content"][0]["tool_use_id"] == "toolu_01CCCCCCCCCCCCCCCCCCCCCC"
    assert inserted["message"]["content"][0]["is_error"] is True
    assert inserted["sessionId"] == call_line["sessionId"]
    child = json.loads(out[10])
    assert child["parentUuid"] == inserted["uuid"]
    assert out[10].replace(inserted["uuid"].encode(), call_line["uuid"].encode()) == lines[9]


def test_openai_chat_repair_keeps_the_files_indent() -> None:
    data = (SAMPLES / "formats" / "openai_chat.json").read_bytes()
    out = analyze(data, "openai_chat.json").repaired
    assert json.loads(out)[8] == {
        "role": "tool",
        "tool_call_id": "call_CCCCCCCCCCCCCCCCCCCCCCCC",
        "content": PRESETS["synthesize"].synthetic_text,
    }
    assert b'  {\n    "role": "tool",\n    "tool_call_id": "call_CCCC' in out
    assert out.startswith(data[: data.index(b'"tool_call_id": "call_BBBB')])


@pytest.mark.parametrize("name", sorted(ORPHANS))
def test_discard_drops_the_unanswered_call(name: str) -> None:
    data = (SAMPLES / "formats" / name).read_bytes()
    result = analyze(data, name, "discard")
    _, call_id, _ = ORPHANS[name]
    assert [(op.kind.value, op.tool_call_id) for op in result.plan.ops] == [("drop_call", call_id)]
    assert call_id.encode() not in result.repaired
