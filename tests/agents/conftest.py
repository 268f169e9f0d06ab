"""Shared fixtures of the agent tier: a temporary HOME, the strict mock provider,
running an agent CLI with a bounded timeout, and the tier's figures.

Every agent test resumes one session file (raw, or repaired under a policy) in
the real agent CLI, with HOME pointed at a fresh temporary folder and the
provider at `MockProvider` on 127.0.0.1. `run_cli` starts the CLI in its own
process group and kills the whole group when the timeout passes, so a hung
agent (or a child it spawned) never outlives its test.

`figures` collects one `Outcome` per (agent, input, variant) run; the
terminal summary prints them per agent at the end of the run and writes them to
`var/agents-figures.json` (the README's test section quotes those numbers).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agents.provider import MockProvider
from transcripts.replay import Message

# Seconds one agent resume may take; they answer the mock in 1-3 s here.
AGENT_TIMEOUT = 60.0
FIGURES_FILE = Path(__file__).resolve().parents[2] / "var" / "agents-figures.json"

# Settings that keep every agent offline: no telemetry, update checks, or
# non-essential traffic (each agent's own documented switches).
OFFLINE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CODEX_DISABLE_TELEMETRY": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "DO_NOT_TRACK": "1",
    "PI_OFFLINE": "1",
}


@dataclass
class Run:
    """One finished agent process: its exit code (None on timeout), output and duration."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def describe(self) -> str:
        """Return a short account for assertion messages: the command, its end and output tails."""
        end = "timed out" if self.timed_out else f"exit {self.returncode}"
        return (
            f"{' '.join(self.argv)}: {end} after {self.seconds:.1f}s\n"
            f"stdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-1500:]}"
        )


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """Return a minimal environment for an agent: PATH, HOME, locale, the offline switches.

    Nothing else of the caller's environment leaks in (no real API keys, no
    proxies); `extra` adds the agent's own variables.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        **OFFLINE_ENV,
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env.update(extra)
    return env


def run_cli(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = AGENT_TIMEOUT
) -> Run:
    """Run `argv` in `cwd` with exactly `env`, stdin closed; return the finished `Run`.

    The process leads a new session; on timeout its whole process group is
    killed (SIGKILL) and `returncode` is None.
    """
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        code = None
    else:
        # Children an agent left behind (MCP servers, shells) go with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return Run(argv, code, stdout, stderr, time.monotonic() - started)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Return a fresh, empty HOME for one agent run (with a `project` folder as its cwd)."""
    path = tmp_path / "home"
    (path / "project").mkdir(parents=True)
    return path


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    """Return a started strict `MockProvider` on 127.0.0.1; closed after the test."""
    mock = MockProvider(strict=True).start()
    try:
        yield mock
    finally:
        mock.close()


@dataclass
class Outcome:
    """What one agent run of one input showed.

    `variant` is `raw` or the repair policy. `opened` is False when the agent
    could not load the file at all (no conversation request). `valid` is the
    provider's verdict on the request; `texts`/`texts_kept` count the raw
    live branch's texts and results the repair was bound to keep, and how many
    the request carried.
    """

    agent: str
    input: str
    variant: str
    opened: bool
    valid: bool
    texts: int = 0
    texts_kept: int = 0


@dataclass
class Figures:
    """The session-wide collector of `Outcome`s."""

    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def summary(self) -> list[dict[str, Any]]:
        """Return one row per agent: inputs, runs, cannot-open, valid raw/repaired, texts kept."""
        rows = []
        for agent in sorted({o.agent for o in self.outcomes}):
            mine = [o for o in self.outcomes if o.agent == agent]
            raw = [o for o in mine if o.variant == "raw"]
            repaired = [o for o in mine if o.variant != "raw"]
            blocked = {
                o.input
                for o in raw
                if not o.opened and all(not r.opened for r in repaired if r.input == o.input)
            }
            rows.append(
                {
                    "agent": agent,
                    "inputs": len({o.input for o in mine}),
                    "runs": len(mine),
                    "cannot_open": len(blocked),
                    "valid_raw": sum(o.valid for o in raw if o.input not in blocked),
                    "raw": sum(o.input not in blocked for o in raw),
                    "valid_repaired": sum(o.valid for o in repaired if o.input not in blocked),
                    "repaired": sum(o.input not in blocked for o in repaired),
                    "texts": sum(o.texts for o in repaired),
                    "texts_kept": sum(o.texts_kept for o in repaired),
                }
            )
        return rows


_FIGURES = Figures()


@pytest.fixture(scope="session")
def figures() -> Figures:
    """Return the session's collector; the terminal summary reports what it holds."""
    return _FIGURES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = _FIGURES.summary()
    if not rows:
        return
    terminalreporter.section("agent tier")
    terminalreporter.write_line(
        f"{'agent':<14}{'inputs':>7}{'runs':>6}{'cannot open':>12}"
        f"{'valid raw':>11}{'valid repaired':>16}{'texts kept':>13}"
    )
    for r in rows:
        terminalreporter.write_line(
            f"{r['agent']:<14}{r['inputs']:>7}{r['runs']:>6}{r['cannot_open']:>12}"
            f"{r['valid_raw']:>6}/{r['raw']:<4}{r['valid_repaired']:>10}/{r['repaired']:<5}"
            f"{r['texts_kept']:>7}/{r['texts']:<5}"
        )
    FIGURES_FILE.parent.mkdir(exist_ok=True)
    FIGURES_FILE.write_text(
        json.dumps({"agents": rows, "outcomes": [asdict(o) for o in _FIGURES.outcomes]}, indent=1)
    )


def history_matches(preview: list[Message], sent: list[Message]) -> bool:
    """Return True when `sent` is `preview` followed by the new turn only.

    The new turn (the agent's own instructions and context, the prompt) holds
    texts and no tool call or result; the preview models what comes before it.
    """
    head, tail = sent[: len(preview)], sent[len(preview) :]
    return head == preview and not any(m.calls or m.results for m in tail)
