"""A file read by byte ranges (FileSource) gives exactly what its bytes in memory give."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

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


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=60).map(lambda b: bytes(b"a\n\r{"[x % 4] for x in b)),
    chunk=st.integers(min_value=1, max_value=9),
)
def test_lines_split_the_same_from_a_file_in_any_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, chunk: int
) -> None:
    monkeypatch.setattr(source_module, "CHUNK", chunk)
    path = tmp_path / "l.jsonl"
    path.write_bytes(data)
    with FileSource(path) as source:
        assert list(source_module.iter_lines(source)) == list(source_module.iter_lines(data))


def test_a_first_line_longer_than_the_sniffed_head_still_streams(tmp_path: Path) -> None:
    # A long first record (a summary, a big prompt) must not make the file a JSON document,
    # read whole: the file is read in slices of at most a chunk and that first line.
    first = b'{"type":"summary","summary":"' + b"s" * 100_000 + b'","leafUuid":"x"}\n'
    body = sessions.claude_code(sessions.Script([sessions.Turn(["c1", "c2"], ["ok", "missing"])]))
    path = tmp_path / "long-first.jsonl"
    path.write_bytes(first + body * 3000)
    reads: list[int] = []

    class Counted(FileSource):
        def __getitem__(self, where: slice) -> bytes:
            data = super().__getitem__(where)
            reads.append(len(data))
            return data

        def read_into(self, buffer: bytearray, start: int) -> int:
            read = super().read_into(buffer, start)
            reads.append(read)
            return read

    with Counted(path) as source:
        streamed = analyze(source, path.name, summaries=False)
        assert streamed.error is None and streamed.format == "claude_code"
        assert max(reads) <= source_module.CHUNK + len(first) + 4096 < len(source)
    assert streamed.fault_counts == analyze(path.read_bytes(), path.name).fault_counts


def test_spans_read_in_runs_give_each_spans_bytes(tmp_path: Path, monkeypatch: Any) -> None:
    data = bytes(range(256)) * 64
    path = tmp_path / "s.bin"
    path.write_bytes(data)
    monkeypatch.setattr(source_module, "CHUNK", 1000)
    wanted = [(0, 10), (10, 10), (990, 1010), (1005, 3000), (500, 600), (16000, 16384)]
    wanted.append((16384, 16384))  # empty, at the end
    with FileSource(path) as source:
        reads: list[int] = []
        real = FileSource.__getitem__

        def counted(self: FileSource, where: slice) -> bytes:
            reads.append(where.start)
            return real(self, where)

        monkeypatch.setattr(FileSource, "__getitem__", counted)
        assert list(source.spans(wanted)) == [data[a:b] for a, b in wanted]
    # One read for the first two, one for each span past the run held, one going back.
    assert reads == [0, 990, 1005, 500, 16000]
