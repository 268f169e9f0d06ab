"""Sessions from tools/gen_sessions.py (the shared workload): faults found as injected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from transcripts.core.validate import validate
from transcripts.engine import analyze
from transcripts.formats import load

GENERATOR = Path(__file__).resolve().parents[2] / "tools" / "gen_sessions.py"
SUFFIX = {
    "claude_code": "jsonl",
    "codex": "jsonl",
    "openclaw": "jsonl",
    "openai_chat": "json",
    "anthropic": "json",
}


def generate(tmp_path: Path, fmt: str, fault_rate: float, seed: int) -> tuple[Path, dict]:
    out = tmp_path / f"{fmt}-{seed}.{SUFFIX[fmt]}"
    subprocess.run(
        [
            sys.executable,
            str(GENERATOR),
            "--format",
            fmt,
            "--records",
            "1200",
            "--seed",
            str(seed),
            "--fault-rate",
            str(fault_rate),
            "--parallel-rate",
            "0.3",
            "--result-bytes",
            "20:400",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out, json.loads(Path(f"{out}.faults.json").read_text())


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_a_healthy_session_round_trips_byte_for_byte(tmp_path: Path, fmt: str) -> None:
    path, sidecar = generate(tmp_path, fmt, 0.0, seed=11)
    data = path.read_bytes()
    result = analyze(data, path.name)
    assert result.format == fmt
    assert sidecar["fault_count"] == 0
    assert result.faults == []
    assert result.repaired == data


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_injected_faults_are_found_and_repaired(tmp_path: Path, fmt: str) -> None:
    path, sidecar = generate(tmp_path, fmt, 0.08, seed=5)
    data = path.read_bytes()
    result = analyze(data, path.name)
    expected = sorted(
        (e["kind"], e["tool_call_id"], e["record_index"]) for e in sidecar["faults"] if e["fault"]
    )
    assert expected
    assert sorted((str(f.kind), f.tool_call_id, f.record) for f in result.faults) == expected
    repaired = load(result.repaired, path.name)
    assert validate(repaired) == []
    assert not analyze(result.repaired, path.name).plan
