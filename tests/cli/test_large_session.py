"""`pairfix fix` streams: a session larger than the memory it may use is repaired all the same."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120 << 20  # address space allowed to the pairfix process, in bytes
SCRIPT = Path(sys.executable).with_name("pairfix")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _pairfix(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(SCRIPT), *argv],
        preexec_fn=_limited,
        capture_output=True,
        timeout=300,
        check=False,
    )


def test_a_session_larger_than_the_memory_limit_is_repaired(tmp_path: Path) -> None:
    session = tmp_path / "big.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gen_sessions.py"),
            "--format",
            "claude_code",
            "--records",
            "30000",
            "--seed",
            "5",
            "--fault-rate",
            "0.01",
            "--out",
            str(session),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    size = session.stat().st_size
    assert size > 1.2 * LIMIT  # reading it whole would not fit
    done = _pairfix("fix", str(session), "--out", str(tmp_path / "fixed"))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"ops: " in done.stdout and b"insert_result=" in done.stdout
    repaired = tmp_path / "fixed" / "big.jsonl"
    assert abs(repaired.stat().st_size - size) < size // 100
    # The repair holds no fault a second repair would mend, checked under the same limit.
    again = _pairfix("check", str(repaired))
    assert again.returncode == 0, again.stdout.decode()[-2000:]


def test_the_limit_stops_a_whole_file_read(tmp_path: Path) -> None:
    session = tmp_path / "blob.jsonl"
    with open(session, "wb") as f:
        f.truncate(int(1.2 * LIMIT))
    code = "import sys; open(sys.argv[1], 'rb').read()"
    done = subprocess.run(
        [sys.executable, "-c", code, str(session)],
        preexec_fn=_limited,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and b"MemoryError" in done.stderr


def test_pairfix_off_a_terminal_runs_on_one_thread(tmp_path: Path) -> None:
    # A thread reserves its stack and a malloc arena (64 MiB of address space
    # each): under a memory limit that is what made the streaming fix fail at
    # random, from tqdm's monitor thread started for a bar never shown.
    session = tmp_path / "s.jsonl"
    session.write_bytes(
        (ROOT / "demo" / "samples" / "formats" / "claude_code.jsonl").read_bytes()
        * 6000  # above BAR_BYTES
    )
    code = (
        "import sys, threading\n"
        "from transcripts import cli\n"
        "status = cli.main(sys.argv[1:])\n"
        "print(sorted(t.name for t in threading.enumerate()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "check", str(session)],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.stdout.decode().splitlines()[-1] == "['MainThread']", done.stderr.decode()[-500:]
