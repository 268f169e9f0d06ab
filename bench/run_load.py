"""Load test: gunicorn on demo data, 50 locust users browsing sessions for two minutes.

    .venv/bin/python bench/run_load.py [--users 50] [--time 2m] [--workers 2] [--threads 4]

Everything lives in var/load (made afresh each run): a SQLite database, the
demo sessions plus generated ones (tools/gen_sessions.py), collected static
files. gunicorn serves with production settings (DEBUG=False, JSON logs to
var/load/gunicorn.log) on 127.0.0.1, except that cookies are not
HTTPS-only and nothing redirects to https: there is no TLS on the loopback.
locust (bench/load.py) runs headless against it; the runner prints requests,
failures, median, p95 and p99 latency per page and in all, writes locust's CSV
to var/load/, and exits non-zero if any request failed. Only addresses on this
machine are used, and the run stops by itself.
"""

from __future__ import annotations

import argparse
import csv
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
OUT = ROOT / "var" / "load"


def free_port() -> int:
    """Return a TCP port on the loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def prepare(env: dict[str, str], sessions: int, records: int) -> None:
    """Migrate, load the demo sessions and `sessions` generated ones, collect static files."""
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "demo")
    generated = OUT / "generated"
    for fmt, seed in (("claude_code", 1), ("openai_chat", 2)):
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "tools" / "gen_sessions.py"),
                "--format",
                fmt,
                "--records",
                str(records),
                "--sessions",
                str(sessions // 2),
                "--fault-rate",
                "0.3",
                "--result-bytes",
                "100:4000",
                "--seed",
                str(seed),
                "--out-dir",
                str(generated / fmt),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    files = sorted(str(p) for p in generated.rglob("*") if p.is_file())
    subprocess.run(
        [sys.executable, "manage.py", "ingest", *files, "--workspace", "Demo", "--user", "demo"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    manage(env, "collectstatic", "--no-input", "-v", "0")


def wait_healthy(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"gunicorn did not answer {url}/healthz within {timeout:.0f}s")


def report(stats: Path) -> int:
    """Print the locust stats CSV as a table; return the number of failed requests."""
    with stats.open() as f:
        rows = list(csv.DictReader(f))
    print(f"\n{'page':<44} {'requests':>8} {'failed':>6} {'median':>7} {'p95':>6} {'p99':>6}")
    for row in rows:
        print(
            f"{row['Name'][:44]:<44} {row['Request Count']:>8} {row['Failure Count']:>6} "
            f"{row['50%']:>5}ms {row['95%']:>4}ms {row['99%']:>4}ms"
        )
    total = rows[-1]
    print(
        f"\n{total['Request Count']} requests, {total['Failure Count']} failed, "
        f"{float(total['Requests/s']):.1f} requests/s, p95 {total['95%']} ms; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return int(total["Failure Count"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    # Logging in costs a password hash (PBKDF2, by design): users arrive two a second.
    parser.add_argument("--spawn-rate", type=float, default=2)
    parser.add_argument("--time", default="2m", help="locust --run-time, e.g. 2m")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--sessions", type=int, default=40, help="generated sessions to add")
    parser.add_argument("--records", type=int, default=200, help="records per generated session")
    args = parser.parse_args()

    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")},
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "VAR_DIR": str(OUT),
        # Plain HTTP on the loopback: no redirect to https, cookies sent without TLS.
        "SECURE_SSL_REDIRECT": "False",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_HSTS_SECONDS": "0",
        "LOG_FORMAT": "json",
    }
    print(f"preparing {OUT} ...", flush=True)
    prepare(env, args.sessions, args.records)
    with (OUT / "gunicorn.log").open("w") as log:
        server = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "project.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(args.workers),
                "--threads",
                str(args.threads),
                "--worker-class",
                "gthread",
                # Its default socket is one per machine user: other servers may share it.
                "--no-control-socket",
                # Idle connections outlive a user's pause between pages (at most 3 s), so
                # the server never closes one just as the client sends on it.
                "--keep-alive",
                "5",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_healthy(url)
            print(
                f"gunicorn ({args.workers} workers x {args.threads} threads) at {url}; "
                f"locust: {args.users} users for {args.time} ...",
                flush=True,
            )
            subprocess.run(
                [
                    str(BIN / "locust"),
                    "-f",
                    str(ROOT / "bench" / "load.py"),
                    "--headless",
                    "--users",
                    str(args.users),
                    "--spawn-rate",
                    str(args.spawn_rate),
                    "--run-time",
                    args.time,
                    "--host",
                    url,
                    "--csv",
                    str(OUT / "locust"),
                    "--only-summary",
                    # At the end, requests under way finish instead of counting as errors.
                    "--stop-timeout",
                    "30",
                    "--exit-code-on-error",
                    "0",
                ],
                cwd=ROOT,
                check=True,
                timeout=3600,
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    failed = report(OUT / "locust_stats.csv")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
