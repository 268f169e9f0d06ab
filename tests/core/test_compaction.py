"""The history a compaction hid: which records are not sent, and what faults they would have."""

from tests.helpers import SAMPLES
from transcripts import formats
from transcripts.core.compaction import before_compaction
from transcripts.core.detect import detect

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
