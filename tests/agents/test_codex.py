"""Codex 0.169.0 resumes each input, raw and repaired, against the strict mock provider.

The rollout goes to `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<timestamp>-<id>.jsonl`;
`config.toml` re-points the built-in provider (`openai_base_url`; Codex refuses
to change a thread's provider on resume) and sets `approval_policy = "never"`,
`sandbox_mode = "read-only"`; `codex exec --skip-git-repo-check resume <id> PROMPT`.
Codex tries a websocket first; the mock answers 426 and it falls back to SSE.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents import npm
from tests.agents.conftest import Figures, base_env
from tests.agents.resume import PROMPT, Agent, Items, canonical, check_input
from tests.helpers import generated_session
from transcripts.core.model import Transcript
from transcripts.replay import message_text
from transcripts.replay.codex import PACKAGE

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "demo" / "samples"
SESSIONS = Path(__file__).resolve().parent / "sessions"
INPUTS = {
    "sample": SAMPLES / "formats" / "codex_rollout.jsonl",
    **{p.stem: p for p in sorted((SAMPLES / "cases").glob("*_codex-*.jsonl"))},
    **{p.stem: p for p in sorted(SESSIONS.glob("codex_*.jsonl"))},
}
GENERATED = {1: 0.5, 2: 0.5, 3: 0.0}
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


@pytest.fixture(scope="module")
def codex() -> Path:
    return npm.binary(npm.install(*PACKAGE), "codex")


@pytest.fixture(scope="module")
def agent(codex: Path) -> Agent:
    def start(home: Path, data: bytes, url: str) -> tuple[list[str], Path, dict[str, str]]:
        first = json.loads(data.splitlines()[0])
        session = str(first.get("payload", first)["id"])
        cwd = home / "project"
        codex_home = home / ".codex"
        folder = codex_home / "sessions" / "2025" / "11" / "01"
        folder.mkdir(parents=True)
        cwd.mkdir()
        (folder / f"rollout-2025-11-01T12-00-00-{session}.jsonl").write_bytes(data)
        (codex_home / "config.toml").write_text(
            f'openai_base_url = "{url}/v1"\napproval_policy = "never"\nsandbox_mode = "read-only"\n'
        )
        env = base_env(home, CODEX_HOME=str(codex_home), OPENAI_API_KEY="sk-pairfix-test")
        argv = [str(codex), "exec", "--skip-git-repo-check", "resume", session, PROMPT]
        return argv, cwd, env

    return Agent("Codex", "openai_responses", start, _request_items, _file_items)


def _add(items: Items, item: Any) -> None:
    if not isinstance(item, dict):
        return
    kind = item.get("type")
    if kind == "message":
        content = item.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and message_text(part.get("text")):
                items.texts.add(message_text(part.get("text")))
    elif kind in _CALLS:
        items.calls.add(str(item.get("call_id")))
    elif kind in _OUTPUTS:
        items.results.add((str(item.get("call_id")), canonical(item.get("output"))))


def _request_items(body: dict[str, Any]) -> Items:
    items = Items(set(), set(), set())
    for item in body["input"]:
        _add(items, item)
    return items


def _file_items(
    transcript: Transcript, indexes: list[int], dropped: set[tuple[int, int | None]]
) -> Items:
    items = Items(set(), set(), set())
    for index in indexes:
        obj = transcript.records[index].obj
        if (index, None) in dropped or (index, 0) in dropped or not isinstance(obj, dict):
            continue
        if obj.get("type") == "response_item":
            _add(items, obj.get("payload"))
        elif obj.get("type") == "compacted" and isinstance(obj.get("payload"), dict):
            for item in obj["payload"].get("replacement_history") or []:
                _add(items, item)
    return items


@pytest.fixture(scope="module")
def generated() -> dict[str, Path]:
    paths = {}
    for seed, rate in GENERATED.items():
        path = generated_session(
            40, seed=seed, fault_rate=rate, result_bytes="50:300", format="codex", parallel_rate=0.3
        )
        paths[f"codex-s{seed}-f{rate}"] = path
    return paths


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_repair_resumes_in_codex(name: str, agent: Agent, tmp_path: Path, figures: Figures) -> None:
    check_input(agent, INPUTS[name].name, INPUTS[name].read_bytes(), tmp_path, figures)


@pytest.mark.parametrize("seed", sorted(GENERATED))
def test_generated_session_resumes_in_codex(
    seed: int, agent: Agent, generated: dict[str, Path], tmp_path: Path, figures: Figures
) -> None:
    path = generated[f"codex-s{seed}-f{GENERATED[seed]}"]
    check_input(agent, path.name, path.read_bytes(), tmp_path, figures)
