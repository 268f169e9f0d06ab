"""DESIGN.md contracts 1-6, as properties over generated sessions of every format."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import sessions
from transcripts.core.validate import validate
from transcripts.engine import PRESETS, analyze
from transcripts.formats import load
from transcripts.formats._json import member_span

BUILDERS: dict[str, tuple[str, Callable[[sessions.Script], bytes]]] = {
    "openai_chat": ("s.json", sessions.openai_chat),
    "openai_chat_pretty": ("s.json", lambda s: sessions.openai_chat(s, indent=2)),
    "anthropic": ("s.json", sessions.anthropic),
    "claude_code": ("s.jsonl", sessions.claude_code),
    "claude_code_crlf": ("s.jsonl", lambda s: sessions.claude_code(s, "\r\n", False)),
    "openclaw": ("s.jsonl", sessions.openclaw),
    "codex": ("s.jsonl", sessions.codex),
    "gemini": ("s.json", sessions.gemini),
    "openhands": ("s.json", sessions.openhands),
}
formats = st.sampled_from(sorted(BUILDERS))


def build(name: str, script: sessions.Script) -> tuple[str, bytes]:
    filename, builder = BUILDERS[name]
    return filename, builder(script)


def violations(data: bytes, filename: str) -> list:
    transcript = load(data, filename)
    return validate(transcript)


@settings(max_examples=150, deadline=None)
@given(name=formats, script=sessions.scripts(healthy=True))
def test_healthy_input_is_untouched(name: str, script: sessions.Script) -> None:
    filename, data = build(name, script)
    for policy in PRESETS:
        result = analyze(data, filename, policy)
        assert result.faults == []
        assert not result.plan
        assert result.repaired == data
    assert violations(data, filename) == []


@settings(max_examples=200, deadline=None)
@given(name=formats, script=sessions.scripts())
def test_it_finds_every_injected_fault(name: str, script: sessions.Script) -> None:
    filename, data = build(name, script)
    result = analyze(data, filename)
    expected = script.expected(name)
    assert sorted((str(f.kind), f.tool_call_id) for f in result.faults) == expected
    assert bool(violations(data, filename)) == bool(expected)


@settings(max_examples=200, deadline=None)
@given(
    name=formats,
    script=sessions.scripts(),
    policy=st.sampled_from(["synthesize", "discard", "native", "openclaw"]),
)
def test_repair_is_valid_idempotent_and_deterministic(
    name: str, script: sessions.Script, policy: str
) -> None:
    filename, data = build(name, script)
    first = analyze(data, filename, policy)
    again = analyze(data, filename, policy)
    assert first.repaired == again.repaired
    assert violations(first.repaired, filename) == []
    second = analyze(first.repaired, filename, policy)
    # Results the repair synthesized are recognised as such, and left alone.
    assert {str(f.kind) for f in second.faults} <= {"existing_synthetic"}
    assert not second.plan
    assert second.repaired == first.repaired


@settings(max_examples=100, deadline=None)
@given(script=sessions.scripts())
def test_every_call_is_answered_once_right_after_it(script: sessions.Script) -> None:
    data = sessions.openai_chat(script)
    repaired = load(analyze(data, "s.json").repaired, "s.json")
    records = repaired.records
    for k, record in enumerate(records):
        if not record.calls:
            continue
        ids = [c.id for c in record.calls]
        answers = []
        for follower in records[k + 1 :]:
            if not follower.results:
                break
            answers.extend(r.tool_call_id for r in follower.results)
        assert sorted(answers) == sorted(ids)


def _unlinked(raw: bytes) -> bytes:
    """Return record bytes with the parent link blanked (re-pointing may change only it)."""
    text = raw.decode()
    for key in ("parentUuid", "parentId"):
        span = member_span(text, key)
        if span is not None:
            text = text[: span[0]] + "null" + text[span[1] :]
    return text.encode()


@settings(max_examples=100, deadline=None)
@given(name=formats, script=sessions.scripts())
def test_records_no_op_touches_are_copied_verbatim(name: str, script: sessions.Script) -> None:
    filename, data = build(name, script)
    result = analyze(data, filename)
    touched = {i for op in result.plan.ops for i in (op.record, op.target) if i is not None}
    raw = load(data, filename)
    out = load(result.repaired, filename)
    kept = [r for r in raw.records if r.index not in touched]
    copies = [result.repaired[r.start : r.end] for r in out.records]
    unlinked = [_unlinked(c) for c in copies]
    for record in kept:
        original = data[record.start : record.end]
        if raw.tree:
            assert _unlinked(original) in unlinked
        else:
            assert original in copies
