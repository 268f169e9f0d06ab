"""`pairfix fix` streams: a session larger than the memory it may use is repaired all the same.

Each `pairfix` run is its own process under an address-space limit
(`resource.setrlimit`), and its peak resident memory comes from `os.wait4`:
a session four times as long may cost no more than a few MB more (FLAT).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120 << 20  # address space allowed to the pairfix process, in bytes
SCRIPT = Path(sys.executable).with_name("pairfix")
SMALL, LARGE = 10_000, 40_000  # records of the two sessions compared
# Tool results of 0.1 to 34 KB make the large session about 170 MB: over the limit.
RESULT_BYTES = "100:34000"
# Peak RSS the large session may add to the small one's, in bytes: a few MB. A
# streamed record's columns cost about 110 bytes (transcripts/core/store.py), so
# the 30,000 records more add about 3 MiB; Record objects would add 15 MiB.
FLAT = 6 << 20


@dataclass(frozen=True)
class Done:
    """A finished `pairfix` process: exit status, output and peak resident memory (bytes)."""

    returncode: int
    stdout: bytes
    stderr: bytes
    peak: int


# The child's peak is read by a small launcher, not by the test process: Linux counts
# the memory of the process that forked a child into the child's peak, so a child of
# pytest would report pytest's own size.
LAUNCHER = """
import os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\npeak {usage.ru_maxrss * 1024}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _pairfix(*argv: str) -> Done:
    """Run `pairfix argv` under the limit; return its status, output and peak RSS."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, str(LIMIT), str(SCRIPT), *argv],
        capture_output=True,
        timeout=300,
        check=False,
    )
    stderr, _, peak = done.stderr.rpartition(b"\npeak ")
    return Done(done.returncode, done.stdout, stderr, int(peak))


def _session(path: Path, records: int) -> Path:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gen_sessions.py"),
            "--format",
            "claude_code",
            "--records",
            str(records),
            "--seed",
            "5",
            "--fault-rate",
            "0.01",
            "--result-bytes",
            RESULT_BYTES,
            "--out",
            str(path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return path


def test_a_session_larger_than_the_memory_limit_is_repaired_in_flat_memory(
    tmp_path: Path,
) -> None:
    small = _session(tmp_path / "small.jsonl", SMALL)
    large = _session(tmp_path / "large.jsonl", LARGE)
    size = large.stat().st_size
    assert size > 1.2 * LIMIT  # reading it whole would not fit
    fixed = tmp_path / "fixed"
    runs = {}
    for session in (small, large):
        done = _pairfix("fix", str(session), "--out", str(fixed))
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        runs[session] = done
    assert b"ops: " in runs[large].stdout and b"ops: none" not in runs[large].stdout
    repaired = fixed / "large.jsonl"
    assert abs(repaired.stat().st_size - size) < size // 100
    # The repair holds no fault a second repair would mend, checked under the same limit.
    again = _pairfix("check", str(repaired))
    assert again.returncode == 0, again.stdout.decode()[-2000:]
    growth = runs[large].peak - runs[small].peak
    figures = (
        f"peak RSS {runs[small].peak / 2**20:.1f} MiB for {SMALL} records, "
        f"{runs[large].peak / 2**20:.1f} MiB for {LARGE}: {growth / 2**20:.1f} MiB more "
        f"({growth / (LARGE - SMALL):.0f} bytes per record)"
    )
    assert growth <= FLAT, f"not flat: {figures}, over {FLAT / 2**20:.0f} MiB"


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
