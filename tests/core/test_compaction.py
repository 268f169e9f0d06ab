"""The history a compaction hid: which records are not sent, and what faults they would have."""

import io

from tests.helpers import SAMPLES
from transcripts import formats
from transcripts.core.compaction import before_compaction
from transcripts.core.detect import detect
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
