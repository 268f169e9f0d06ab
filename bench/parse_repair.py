"""Benchmark: parse + detect + repair + render of generated sessions, next to orjson alone.

Prints, per format, the file size, the engine's time and throughput (reading
the file through a FileSource: JSON lines stream, the repaired file is written
to /dev/null), the time orjson takes merely to decode the same records, their
ratio, and the peak memory (VmHWM) of a fresh process that does the same.

    .venv/bin/python bench/parse_repair.py [--records 50000] [--fault-rate 0.01]
    .venv/bin/python bench/parse_repair.py --formats claude_code --records 190000  # ~1 GB
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transcripts.engine import FileSource, analyze  # noqa: E402

FORMATS = {
    "claude_code": "jsonl",
    "codex": "jsonl",
    "openclaw": "jsonl",
    "openai_chat": "json",
    "anthropic": "json",
}


def orjson_only(data: bytes, suffix: str) -> float:
    start = time.perf_counter()
    if suffix == "jsonl":
        for line in data.splitlines():
            orjson.loads(line)
    else:
        orjson.loads(data)
    return time.perf_counter() - start


def peak_rss_mb(path: Path) -> float:
    """Return the peak RSS (MB) of a fresh process that analyzes `path` once."""
    # VmHWM, unlike ru_maxrss, starts afresh at exec: it measures the child alone.
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]);"
        "from transcripts.engine import FileSource, analyze;"
        "source = FileSource(sys.argv[1]); result = analyze(source, sys.argv[1]);"
        "result.write_repaired(open('/dev/null', 'wb'));"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--fault-rate", type=float, default=0.01)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    print(
        f"{'format':12} {'MB':>7} {'engine s':>9} {'MB/s':>7} {'orjson s':>9} "
        f"{'ratio':>6} {'faults':>7} {'ops':>6} {'peak RSS MB':>12}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            suffix = FORMATS[fmt]
            path = Path(tmp) / f"{fmt}.{suffix}"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "tools" / "gen_sessions.py"),
                    "--format",
                    fmt,
                    "--records",
                    str(args.records),
                    "--seed",
                    "1",
                    "--fault-rate",
                    str(args.fault_rate),
                    "--out",
                    str(path),
                ],
                check=True,
                capture_output=True,
            )
            start = time.perf_counter()
            with FileSource(path) as source, open(os.devnull, "wb") as sink:
                result = analyze(source, path.name)
                result.write_repaired(sink)
            engine = time.perf_counter() - start
            data = path.read_bytes()
            base = orjson_only(data, suffix)
            del data
            size = path.stat().st_size / 1e6
            print(
                f"{fmt:12} {size:7.1f} {engine:9.2f} {size / engine:7.1f} {base:9.2f} "
                f"{engine / base:6.1f} {len(result.faults):7d} {len(result.plan.ops):6d} "
                f"{peak_rss_mb(path):12.0f}"
            )


if __name__ == "__main__":
    main()
