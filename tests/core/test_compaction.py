"""The history a compaction hid: which records are not sent, and what faults they would have."""

import io
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import SAMPLES, generated_session
from transcripts import formats
from transcripts.core import compaction
from transcripts.core.branch import context_scopes
from transcripts.core.compaction import _pair_rows, _plain_rows, before_compaction
from transcripts.core.detect import Pairing, _pair_scope, detect
from transcripts.core.model import Fault, Record, Role, ToolCall, ToolResult, Transcript
from transcripts.core.store import RecordStore
from transcripts.engine import FileSource, analyze

CASE = SAMPLES / "cases" / "01_cc-compaction-orphan-result.jsonl"


def test_a_claude_code_boundary_hides_the_lines_before_it():
    transcript = formats.load(CASE.read_bytes(), CASE.name)
    found = before_compaction(transcript)
    assert found is not None
    assert found.boundary == 7
    assert found.hidden == (0, 1, 2, 3, 4, 5, 6)
    # The BashOutput call before the boundary was answered only after it: in that
    # history alone it has no result.
    assert [(str(f.kind), f.tool_call_id, f.record) for f in found.faults] == [
        ("missing_result", "toolu_syn_out_02", 6)
    ]
    # What counts as a fault for the provider is unchanged.
    assert [str(f.kind) for f in detect(transcript)] == ["orphaned_result"]


def test_a_session_never_compacted_has_nothing_hidden():
    path = SAMPLES / "formats" / "claude_code.jsonl"
    assert before_compaction(formats.load(path.read_bytes(), path.name)) is None


def test_a_subagents_own_file_hides_its_history_before_a_boundary_as_a_session_does(tmp_path):
    # Claude Code writes a subagent that compacted to its own agent-*.jsonl, every line
    # isSidechain: the chain the boundary cut off is that subagent's history, not a
    # sidechain of its own, so the call before it is no fault (it was reported pending).
    lines = CASE.read_bytes().replace(b'"isSidechain": false', b'"isSidechain": true')
    path = tmp_path / "agent-a1.jsonl"
    path.write_bytes(lines)
    main = analyze(CASE.read_bytes(), CASE.name)
    whole = analyze(lines, path.name)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, summaries=False)
        out = io.BytesIO()
        streamed.write_repaired(out)
    for result in (whole, streamed):
        assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
            ("orphaned_result", "toolu_syn_out_02", 9)
        ]
    assert out.getvalue() == whole.repaired
    assert len(whole.repaired.splitlines()) == len(main.repaired.splitlines()) == 11
    found = before_compaction(formats.load(lines, path.name))
    assert found is not None
    assert found.boundary == 7
    assert found.hidden == (0, 1, 2, 3, 4, 5, 6)
    assert [(str(f.kind), f.tool_call_id) for f in found.faults] == [
        ("missing_result", "toolu_syn_out_02")
    ]


# `_pair_rows` pairs a stored session's history in column space; `_pair_scope` is what
# it must agree with, fault for fault and in the same order.
CALL_IDS = ("toolu_a", "toolu_b", "call_c", "call d", "", "x|y")
TEXTS = ("ok", "", "No result provided", "aborted", "[Tool result missing due to internal error]")


@st.composite
def _records(draw: st.DrawFn) -> list[Record]:
    """Draw a short run of records: calls, results, other blocks and flags at random."""
    records = []
    for index in range(draw(st.integers(1, 14))):
        role = draw(st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL, Role.META]))
        calls_n = draw(st.integers(0, 3)) if role is Role.ASSISTANT else 0
        results_n = draw(st.integers(0, 3)) if role is not Role.META else 0
        other = draw(st.integers(0, 2))
        blocks = draw(st.permutations(range(calls_n + results_n + other)))
        calls = [
            ToolCall(draw(st.sampled_from(CALL_IDS)), draw(st.sampled_from(("Bash", ""))), index, b)
            for b in sorted(blocks[:calls_n])
        ]
        results = [
            ToolResult(
                draw(st.sampled_from(CALL_IDS)), index, b, False, draw(st.sampled_from(TEXTS))
            )
            for b in sorted(blocks[calls_n : calls_n + results_n])
        ]
        message_id = draw(st.sampled_from((None, "m1", "m2"))) if role is Role.ASSISTANT else None
        records.append(
            Record(
                index,
                0,
                0,
                role,
                str(role),
                calls=calls,
                results=results,
                other_blocks=other,
                message_id=message_id,
                aborted=role is Role.ASSISTANT and draw(st.booleans()),
            )
        )
    return records


def _agrees(transcript: Transcript, segment: list[int]) -> bool:
    """Assert that `_pair_rows` finds what `_pair_scope` does; return False when it passes."""
    found = _pair_rows(transcript, segment)
    pairing = Pairing(segment, [])
    _pair_scope(transcript, segment, pairing, False)
    if found is None:
        return False
    assert found == pairing.faults
    return True


PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "bedrock")


@given(_records(), st.sampled_from(PROVIDERS), st.booleans())
@settings(max_examples=400, deadline=None)
def test_history_paired_in_column_space_has_the_faults_the_views_give(
    records: list[Record], provider: str, rewritten: bool
) -> None:
    store = RecordStore(b"")
    store.extend(records)
    transcript = Transcript(
        "claude_code",
        provider,
        store,
        b"",
        rewritten_ids=frozenset(range(len(records))) if rewritten else frozenset(),
    )
    _agrees(transcript, list(range(len(records))))


@pytest.mark.parametrize(
    "path",
    sorted(p for p in SAMPLES.glob("*/*.json*") if not p.name.endswith(".expect.json")),
    ids=lambda p: p.name,
)
def test_each_samples_scopes_paired_in_column_space_have_the_faults_the_views_give(
    path: Path,
) -> None:
    transcript = formats.load(path.read_bytes(), path.name)
    store = RecordStore(transcript.raw)
    store.extend(transcript.records)
    transcript = replace(transcript, records=store)
    if not _plain_rows(transcript):
        # Gemini's order, a stored Responses history: paired by the views alone.
        assert transcript.provider in ("gemini", "openai_responses"), transcript.provider
        return
    whole = [r.index for r in store if not r.inactive and r.error is None]
    for segment in [whole, *context_scopes(transcript)]:
        _agrees(transcript, segment)


@pytest.mark.parametrize("format", ["claude_code", "openclaw"])
def test_a_long_history_before_compactions_is_paired_in_column_space(
    format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = generated_session(8000, seed=3, fault_rate=0.2, format=format, parallel_rate=0.3)
    with FileSource(path) as source:
        transcript = analyze(source, path.name, summaries=False).transcript
        assert transcript is not None
        ran: list[bool] = []

        def counted(
            transcript: Transcript, segment: list[int], unusual: set[int] | None = None
        ) -> list[Fault] | None:
            found = _pair_rows(transcript, segment, unusual)
            ran.append(found is not None)
            return found

        monkeypatch.setattr(compaction, "_pair_rows", counted)
        fast = before_compaction(transcript)
        assert fast is not None and len(fast.faults) > 100
        assert ran and all(ran)
        monkeypatch.setattr(compaction, "_plain_rows", lambda transcript: False)
        assert before_compaction(transcript) == fast
