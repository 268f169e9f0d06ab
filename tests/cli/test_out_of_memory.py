"""Out of memory is an error that names it (exit 2), never a malformed line dropped or a crash.

orjson reports an allocation it cannot make as a JSONDecodeError; read as a
malformed record, the `discard` policy dropped a valid 100 MB line and exited 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SESSION = Path(__file__).parents[1] / "agents" / "sessions" / "claude_code_dup_call_id.jsonl"
LAUNCHER = """
import resource, sys
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["pairfix", *sys.argv[2:]]
from transcripts.cli import entry_point
entry_point()
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a valid Claude Code session whose first prompt is 100 MiB long."""
    out, done = [], False
    for line in SESSION.read_bytes().splitlines():
        record = json.loads(line)
        if (
            not done
            and record.get("type") == "user"
            and isinstance(record["message"]["content"], str)
        ):
            record["message"]["content"], done = "A" * (100 << 20), True
        out.append(json.dumps(record).encode())
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


def _run(limit_mb: int, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(limit_mb), *argv],
        capture_output=True,
        timeout=300,
        check=False,
    )


def test_out_of_memory_never_drops_a_valid_record(big: Path, tmp_path: Path) -> None:
    done = _run(600, "fix", "--policy", "discard", "--out", str(tmp_path), str(big))
    assert done.returncode == 2, done.stdout.decode()[:500]
    assert b"big.jsonl: cannot read: out of memory" in done.stderr
    assert not (tmp_path / big.name).exists()


def test_out_of_memory_while_checking_is_an_error_not_a_crash(big: Path) -> None:
    done = _run(300, "check", str(big))
    assert done.returncode == 2, (done.returncode, done.stderr.decode()[-500:])
    assert b"out of memory" in done.stderr
