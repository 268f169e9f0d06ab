"""Claude Code 2.1.328 resumes each input, raw and repaired, against the strict mock provider.

The session goes to `$HOME/.claude/projects/<cwd, every non-alphanumeric
character as ->/<sessionId>.jsonl`; `claude -p --resume <sessionId> PROMPT`
runs from that cwd with `ANTHROPIC_BASE_URL` at the mock and a dummy key.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.agents import npm
from tests.agents.conftest import Figures, base_env
from tests.agents.resume import PROMPT, Agent, Items, canonical, check_input
from tests.helpers import generated_session
from transcripts.core.model import Role, Transcript
from transcripts.replay import Message, message_text
from transcripts.replay.claude_code import PACKAGE

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "demo" / "samples"
SESSIONS = Path(__file__).resolve().parent / "sessions"
INPUTS = {
    "sample": SAMPLES / "formats" / "claude_code.jsonl",
    **{p.stem: p for p in sorted((SAMPLES / "cases").glob("*_cc-*.jsonl"))},
    **{p.stem: p for p in sorted(SESSIONS.glob("claude_code_*.jsonl"))},
}
# Known product bugs, reported: the test stays and fails loudly once fixed.
KNOWN: dict[str, str] = {}  # input name -> why it is a strict xfail
# Generated sessions (tools/gen_sessions.py): seed -> fault rate.
GENERATED = {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.0}


@pytest.fixture(scope="module")
def claude() -> Path:
    return npm.binary(npm.install(*PACKAGE), "claude")


@pytest.fixture(scope="module")
def agent(claude: Path) -> Agent:
    def start(home: Path, data: bytes, url: str) -> tuple[list[str], Path, dict[str, str]]:
        session = next(
            obj["sessionId"]
            for obj in map(_json, data.splitlines())
            if isinstance(obj, dict) and isinstance(obj.get("sessionId"), str)
        )
        cwd = home / "project"
        folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
        folder.mkdir(parents=True)
        cwd.mkdir()
        (folder / f"{session}.jsonl").write_bytes(data)
        env = base_env(home, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-ant-pairfix-test")
        return [str(claude), "-p", "--resume", session, PROMPT], cwd, env

    return Agent("Claude Code", "anthropic", start, _request_items, _file_items, _history)


def _json(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _history(messages: list[Message]) -> list[Message]:
    """Remove what Claude Code adds for the new turn.

    Its environment and model settings go as `system` messages; the new
    prompt joins the last user message with `<system-reminder>` texts.
    """
    messages = [m for m in messages if m.role != "system"]
    last = messages[-1]
    texts = tuple(t for t in last.texts if t != PROMPT and not t.startswith("<system-reminder>"))
    if texts or last.calls or last.results:
        messages[-1] = replace(last, texts=texts)
    else:
        messages.pop()
    return messages


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _add(items: Items, block: dict[str, Any]) -> None:
    kind = block.get("type")
    if kind == "text" and message_text(block.get("text")):
        items.texts.add(message_text(block.get("text")))
    elif kind == "tool_use":
        items.calls.add(str(block.get("id")))
    elif kind == "tool_result":
        items.results.add((str(block.get("tool_use_id")), canonical(block.get("content"))))


def _request_items(body: dict[str, Any]) -> Items:
    items = Items(set(), set(), set())
    for message in body["messages"]:
        if message.get("role") == "system":
            continue
        for block in _blocks(message.get("content")):
            _add(items, block)
    return items


def _file_items(
    transcript: Transcript, indexes: list[int], dropped: set[tuple[int, int | None]]
) -> Items:
    items = Items(set(), set(), set())
    for index in indexes:
        obj = transcript.records[index].obj
        if not isinstance(obj, dict) or (index, None) in dropped:
            continue
        if obj.get("type") == "system" and obj.get("subtype") == "local_command":
            _add(items, {"type": "text", "text": obj.get("content")})
        # Lines that are not conversation (a failed request's note) are never sent.
        if transcript.records[index].role == Role.META or not isinstance(obj.get("message"), dict):
            continue
        for j, block in enumerate(_blocks(obj["message"].get("content"))):
            if (index, j) not in dropped:
                _add(items, block)
    return items


@pytest.fixture(scope="module")
def generated() -> dict[str, Path]:
    paths = {}
    for seed, rate in GENERATED.items():
        path = generated_session(
            40,
            seed=seed,
            fault_rate=rate,
            result_bytes="50:300",
            format="claude_code",
            parallel_rate=0.3,
        )
        paths[f"claude_code-s{seed}-f{rate}"] = path
    return paths


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True)) if n in KNOWN else n
        for n in sorted(INPUTS)
    ],
)
def test_repair_resumes_in_claude_code(
    name: str, agent: Agent, tmp_path: Path, figures: Figures
) -> None:
    check_input(agent, INPUTS[name].name, INPUTS[name].read_bytes(), tmp_path, figures)


@pytest.mark.parametrize("seed", sorted(GENERATED))
def test_generated_session_resumes_in_claude_code(
    seed: int, agent: Agent, generated: dict[str, Path], tmp_path: Path, figures: Figures
) -> None:
    path = generated[f"claude_code-s{seed}-f{GENERATED[seed]}"]
    check_input(agent, path.name, path.read_bytes(), tmp_path, figures)
