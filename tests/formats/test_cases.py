"""The fault cases of demo/samples/cases: what a correct detector reports and repairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcripts.core.validate import validate
from transcripts.engine import analyze
from transcripts.formats import load
from transcripts.formats._json import member_span

CASES = Path(__file__).resolve().parents[2] / "demo" / "samples" / "cases"


def _cases() -> list[str]:
    return sorted(p.name.removesuffix(".expect.json") for p in CASES.glob("*.expect.json"))


def _unlinked(raw: bytes) -> bytes:
    text = raw.decode()
    for key in ("parentUuid", "parentId"):
        span = member_span(text, key)
        if span is not None:
            text = text[: span[0]] + "null" + text[span[1] :]
    return text.encode()


def _load(case: str) -> tuple[dict, str, bytes]:
    expect = json.loads((CASES / f"{case}.expect.json").read_text())
    source = next(p for p in CASES.glob(f"{case}.*") if not p.name.endswith(".expect.json"))
    return expect, source.name, source.read_bytes()


@pytest.mark.parametrize("case", _cases())
def test_it_reports_the_expected_faults(case: str) -> None:
    expect, name, data = _load(case)
    result = analyze(data, name)
    got = {(str(f.kind), f.tool_call_id, f.record) for f in result.faults}
    for fault in expect["faults"]:
        kinds = {fault["kind"], *fault.get("also_acceptable_kinds", ())}
        assert any((k, fault["tool_call_id"], fault["message_index"]) in got for k in kinds)
    assert len(got) == len(expect["faults"])
    for wrong in expect.get("must_not_report", ()):
        assert not any(
            kind == wrong["kind"] and cid == wrong.get("tool_call_id", cid) for kind, cid, _ in got
        )
    if expect["expected_provider_error"]:
        # The expected text may carry a note or drop the closing sentence.
        heads = [f.error.split(". Each ")[0] for f in result.faults]
        assert any(head in expect["expected_provider_error"] for head in heads)


@pytest.mark.parametrize("case", _cases())
def test_repair_follows_the_expected_sequence(case: str) -> None:
    expect, name, data = _load(case)
    result = analyze(data, name)
    transcript = load(result.repaired, name)
    assert validate(transcript) == []
    sequence = expect.get("expected_output_sequence")
    if sequence == "unchanged":
        assert result.repaired == data
    elif isinstance(sequence, list):
        raw = load(data, name)
        out = result.repaired
        assert len(transcript.records) == len(sequence)
        for position, item in zip(transcript.records, sequence, strict=True):
            if not isinstance(item, int):
                continue
            # Kept records are byte-identical but for a re-pointed parent link.
            before = _unlinked(data[raw.records[item].start : raw.records[item].end])
            assert _unlinked(out[position.start : position.end]) == before


def test_streamed_copies_of_a_call_are_dropped_keeping_the_first() -> None:
    _, name, data = _load("04_anthropic-streaming-dup-tool-use")
    repaired = json.loads(analyze(data, name).repaired)
    original = json.loads(data)
    calls = [b for b in repaired["messages"][1]["content"] if b["type"] == "tool_use"]
    assert [c["id"] for c in calls] == ["toolu_syn_wx_01", "toolu_syn_wx_02", "toolu_syn_wx_03"]
    assert [c["input"] for c in calls] == [
        {"city": "Springfield"},
        {"city": "Riverton"},
        {"city": "Lakeside"},
    ]
    assert repaired["messages"][0] == original["messages"][0]
    assert repaired["messages"][2] == original["messages"][2]


def test_a_second_result_in_one_message_is_dropped_keeping_the_first() -> None:
    _, name, data = _load("05_anthropic-duplicate-tool-result-error-path")
    repaired = json.loads(analyze(data, name).repaired)
    original = json.loads(data)
    content = original["messages"][2]["content"]
    assert repaired["messages"][2]["content"] == [content[0], content[2]]
    assert repaired["messages"][:2] == original["messages"][:2]


def test_a_mid_history_orphan_is_answered_at_the_start_of_the_next_user_message() -> None:
    _, name, data = _load("19_anthropic-resume-orphan-mid-history")
    repaired = json.loads(analyze(data, name).repaired)["messages"]
    original = json.loads(data)["messages"]
    assert len(repaired) == len(original) == 7
    opening, *rest = repaired[2]["content"]
    assert opening["type"] == "tool_result"
    assert opening["tool_use_id"] == "toolu_syn_srv_01"
    assert opening["is_error"] is True
    assert rest == original[2]["content"]
    assert repaired[:2] == original[:2]
    assert repaired[3:] == original[3:]


def test_discarding_a_call_drops_the_reasoning_item_that_led_to_it() -> None:
    _, name, data = _load("07_codex-interrupt-no-tool-output")
    result = analyze(data, name, "discard")
    assert [(op.kind.value, op.record) for op in result.plan.ops] == [
        ("drop_call", 5),
        ("drop_record", 4),
    ]
    out = result.repaired.splitlines()
    original = data.splitlines()
    assert out == original[:4] + original[6:]
    assert validate(load(result.repaired, name)) == []
