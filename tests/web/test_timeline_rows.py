"""A stored timeline row's payload: compact on disk, read back whole under readable names."""

from pathlib import Path

import orjson
import pytest

from tests.helpers import SAMPLES
from transcripts import timeline
from transcripts.core.compaction import before_compaction
from transcripts.engine import analyze
from transcripts.rowdata import RowData

FILES = sorted(p for p in SAMPLES.glob("*/*") if not p.name.endswith(".expect.json"))


def stored_rows(path: Path):
    """Return (engine row, stored payload) for each side-by-side row of the sample at `path`."""
    analysis = analyze(path.read_bytes(), path.name)
    assert analysis.transcript is not None
    built = timeline._rows(analysis, before_compaction(analysis.transcript))
    pairs = zip(analysis.rows, built, strict=True)
    return [(row, orjson.loads(values[8])) for row, values in pairs]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_stored_row_reads_back_as_it_was_written(path):
    for _, stored in stored_rows(path):
        assert RowData.from_json(stored).to_json() == stored


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_rows_faults_and_ops_read_by_name_are_the_engines(path):
    for row, stored in stored_rows(path):
        data = RowData.from_json(stored)
        assert [(f.kind, f.tool_call_id, f.detail, f.error) for f in data.faults] == [
            (str(f.kind), f.tool_call_id or "", f.detail, f.error) for f in row.faults
        ]
        assert [(o.kind, o.policy_row, o.tool_call_id) for o in data.ops] == [
            (str(o.kind), o.policy_row, o.tool_call_id or "") for o in row.ops
        ]
        assert data.left == row.left


def test_the_samples_cover_faults_ops_and_moves():
    payloads = [RowData.from_json(stored) for p in FILES for _, stored in stored_rows(p)]
    assert any(d.faults for d in payloads)
    assert any(d.ops for d in payloads)
    assert any(d.moved_from is not None for d in payloads)
    assert any(d.request_position is not None for d in payloads)
    assert any(d.inserted for d in payloads)
    assert any(d.not_sent is not None and d.would_be for d in payloads)
