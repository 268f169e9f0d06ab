"""Install pinned agent CLIs from the npm registry into a cache outside the repository.

The cache is `$PAIRFIX_AGENT_CACHE` (default `~/.cache/pairfix-agents`), one
folder per package and version, reused between runs; an install that fails
leaves no folder behind, so the next run tries again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CACHE = Path(os.environ.get("PAIRFIX_AGENT_CACHE", Path.home() / ".cache" / "pairfix-agents"))
INSTALL_TIMEOUT = 600  # seconds; a cold install of one CLI takes 20-90 s here


def install(package: str, version: str) -> Path:
    """Return the prefix holding `package@version`, installing it once.

    Raises RuntimeError with npm's output when the install fails.
    """
    prefix = CACHE / f"{package.replace('/', '_').replace('@', '_')}_{version}"
    done = prefix / ".pairfix-installed"
    if done.exists():
        return prefix
    # Two test processes (pytest-xdist workers) install one package once, in turn.
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(prefix.with_name(prefix.name + ".lock"), "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return prefix
        return _install(package, version, prefix, done)


def _install(package: str, version: str, prefix: Path, done: Path) -> Path:
    partial = prefix.with_name(prefix.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    run = subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(partial),
            "--no-audit",
            "--no-fund",
            f"{package}@{version}",
        ],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if run.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"npm install {package}@{version} failed:\n{run.stdout}\n{run.stderr}")
    shutil.rmtree(prefix, ignore_errors=True)
    partial.rename(prefix)
    done.touch()
    return prefix


def binary(prefix: Path, name: str) -> Path:
    """Return the path of the CLI `name` that an install at `prefix` put in node_modules/.bin."""
    return prefix / "node_modules" / ".bin" / name
