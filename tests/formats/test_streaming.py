"""A file read by byte ranges (FileSource) gives exactly what its bytes in memory give."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import sessions
from transcripts.engine import FileSource, analyze
from transcripts.formats import source as source_module

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
FILES = sorted(
    p
    for p in [*SAMPLES.glob("formats/*"), *SAMPLES.glob("cases/*")]
    if not p.name.endswith(".expect.json")
)


def _same(path: Path, policy: str) -> None:
    data = path.read_bytes()
    in_memory = analyze(data, path.name, policy)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, policy)
        out = io.BytesIO()
        streamed.write_repaired(out)
    assert (streamed.format, streamed.error) == (in_memory.format, in_memory.error)
    assert streamed.faults == in_memory.faults
    assert streamed.plan == in_memory.plan
    assert out.getvalue() == in_memory.repaired


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_sample_streams_as_it_reads_in_memory(path: Path) -> None:
    _same(path, "synthesize")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["claude_code", "openclaw", "codex"]),
    script=sessions.scripts(),
    policy=st.sampled_from(["synthesize", "discard"]),
)
def test_generated_sessions_stream_as_they_read_in_memory(
    tmp_path: Path, name: str, script: sessions.Script, policy: str
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(getattr(sessions, name)(script))
    _same(path, policy)


def test_lines_longer_than_a_read_chunk_are_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_module, "CHUNK", 64)
    path = tmp_path / "c.jsonl"
    path.write_bytes(
        sessions.claude_code(sessions.Script([sessions.Turn(["c1", "c2"], ["ok", "missing"])]))
    )
    lines = list(source_module.iter_lines(path.read_bytes()))
    with FileSource(path) as source:
        assert list(source_module.iter_lines(source)) == lines
    _same(path, "synthesize")
