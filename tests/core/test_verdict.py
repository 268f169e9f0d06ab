"""The provider's verdict on a streamed file's repair: read back from a file, as from bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import sessions
from transcripts.engine import analyze
from transcripts.formats.source import FileSource
from transcripts.verdict import verdicts

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "demo/samples/formats"


def _faulty_claude_code() -> bytes:
    script = sessions.Script(
        [
            sessions.Turn(["toolu_a", "toolu_b"], ["ok", "missing"]),
            sessions.Turn(["toolu_c"], ["duplicate"]),
            sessions.Turn(["toolu_d", "toolu_e"], ["displaced", "ok"]),
        ]
    )
    return sessions.claude_code(script)


@pytest.mark.parametrize("policy", ["synthesize", "discard", "native"])
def test_a_streamed_files_verdicts_are_those_of_its_bytes(tmp_path: Path, policy: str) -> None:
    data = _faulty_claude_code()
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    whole = analyze(data, path.name, policy)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, policy)
        before, after = verdicts(streamed)
    assert whole.plan and streamed.plan
    assert before is not None and after is not None
    assert (before, after) == verdicts(whole)
    assert before.count == 3 and not before.valid
    assert after.valid, after


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.json*")), ids=lambda p: p.name)
def test_each_samples_streamed_verdicts_are_those_of_its_bytes(path: Path) -> None:
    with FileSource(path) as source:
        before, after = verdicts(analyze(source, path.name))
    # Each sample's provider refuses it as it is and takes it repaired.
    assert before is not None and before.count == 1
    assert after is not None and after.valid
    assert (before, after) == verdicts(analyze(path.read_bytes(), path.name))


def test_a_streamed_repair_is_read_back_from_a_file_never_held_whole(tmp_path: Path) -> None:
    data = _faulty_claude_code()
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    whole = analyze(data, path.name)
    with FileSource(path) as source:
        streamed = analyze(source, path.name)
        with streamed.repaired_file() as repaired:
            assert isinstance(repaired, FileSource)
            assert repaired[0 : len(repaired)] == whole.repaired
        assert streamed.repaired_counts() == whole.repaired_counts()


def test_with_nothing_to_repair_the_raw_file_is_read_back(tmp_path: Path) -> None:
    script = sessions.Script([sessions.Turn(["toolu_a"], ["ok"])])
    path = tmp_path / "session.jsonl"
    path.write_bytes(sessions.claude_code(script))
    with FileSource(path) as source:
        analysis = analyze(source, path.name)
        assert not analysis.plan
        with analysis.repaired_file() as repaired:
            assert repaired is source
