"""Gemini CLI (@google/gemini-cli) resumes its session files, raw and repaired.

The CLI maps a project root to a slug in `~/.gemini/projects.json` (and an
ownership marker `.project_root` in `tmp/<slug>/`), and `--resume <sessionId>`
looks the id up among `~/.gemini/tmp/<slug>/chats/session-*.json[l]`
(`Storage.listProjectChatFiles`, packages/core). `GOOGLE_GEMINI_BASE_URL`
points it at the mock, a dummy `GEMINI_API_KEY` with `security.auth.selectedType`
`gemini-api-key` authenticates it, `GEMINI_CLI_TRUST_WORKSPACE` trusts the
folder, and `-m gemini-2.5-pro` skips its model router, so one resume sends
one `streamGenerateContent` request. It has no recovery of its own: an
unanswered call is sent as is and Gemini answers 400.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents import npm
from tests.agents._agents2 import (
    PROMPT,
    Items,
    Resumed,
    Runner,
    check_variants,
    resume_inputs,
    resume_variants,
)
from tests.agents.conftest import Figures, Run, base_env, run_cli
from tests.agents.provider import MockProvider
from transcripts.core.model import Role, Transcript
from transcripts.replay import gemini_cli as gemini_model
from transcripts.replay.gemini_cli import PACKAGE

pytestmark = pytest.mark.agents

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
HERE = Path(__file__).parent
SLUG = "work"


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return npm.binary(npm.install(*PACKAGE), "gemini")


def _session_id(data: bytes) -> str:
    first = data.split(b"\n", 1)[0]
    try:
        return str(json.loads(first)["sessionId"])
    except (ValueError, KeyError):
        return str(json.loads(data)["sessionId"])  # the legacy one-document layout


def runner(binary: Path, suffix: str) -> Runner:
    """Return a runner that resumes a file of `suffix` (`.jsonl`, `.json`) in Gemini CLI."""

    def run(root: Path, data: bytes, mock: MockProvider) -> Run:
        home, cwd = root / "home", root / SLUG
        cwd.mkdir(parents=True)
        gemini = home / ".gemini"
        chats = gemini / "tmp" / SLUG / "chats"
        chats.mkdir(parents=True)
        (gemini / "tmp" / SLUG / ".project_root").write_text(str(cwd))
        (gemini / "projects.json").write_text(json.dumps({"projects": {str(cwd): SLUG}}))
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        (gemini / "settings.json").write_text(json.dumps(settings))
        session_id = _session_id(data)
        (chats / f"session-2025-12-02T08-00-{session_id[:8]}{suffix}").write_bytes(data)
        env = base_env(
            home,
            GEMINI_API_KEY="dummy",
            GOOGLE_GEMINI_BASE_URL=mock.url,
            GEMINI_CLI_TRUST_WORKSPACE="true",
        )
        argv = [str(binary), "--resume", session_id, "-m", "gemini-2.5-pro", "-p", PROMPT]
        return run_cli(argv, cwd=cwd, env=env, timeout=45)

    return run


def live_items(transcript: Transcript, live: set[int], dropped: set[tuple[int, int]]) -> Items:
    """Return the texts of the live user and gemini messages and the ids of their results."""
    out = Items()
    for index in live:
        record = transcript.records[index]
        if record.role not in (Role.USER, Role.ASSISTANT) or not isinstance(record.obj, dict):
            continue
        content = record.obj.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content
        for part in parts if isinstance(parts, list) else []:
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str) and text.strip():
                out.texts.add(text.strip())
        for result in record.results:
            if (index, result.block) not in dropped:
                out.results.add(result.tool_call_id)
    return out


def _injected(text: str) -> bool:
    # The CLI's own environment context, coalesced into the first user turn.
    return text.startswith("<session_context>")


INPUTS = [
    "samples/formats/gemini_cli_session.jsonl",
    "sessions/gemini-parallel-rewrite.jsonl",
    "sessions/gemini-cancelled-no-result.jsonl",
    "sessions/gemini-rewound.jsonl",
    "fixtures/gemini_cli_legacy_orphan.json",
    "fixtures/gemini_cli_legacy_healthy.json",
]


def _input(name: str) -> bytes:
    if name.startswith("samples/"):
        return (SAMPLES / name.removeprefix("samples/")).read_bytes()
    if name.startswith("fixtures/"):
        return (HERE.parent / "formats" / name).read_bytes()
    return (HERE / name).read_bytes()


@pytest.fixture(scope="module")
def resumed(gemini_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Return {input: {variant: Resumed}}: every input resumed raw and repaired, together."""
    root = tmp_path_factory.mktemp("gemini")

    def job(k: int, name: str) -> Callable[[], dict[str, Resumed]]:
        fmt = "gemini_cli_json" if name.endswith(".json") else "gemini_cli"
        return lambda: resume_variants(
            runner(gemini_bin, Path(name).suffix),
            root / str(k),
            _input(name),
            Path(name).name,
            "gemini",
            fmt,
            gemini_model.preview,
        )

    return resume_inputs({name: job(k, name) for k, name in enumerate(INPUTS)})


@pytest.mark.parametrize("name", INPUTS)
def test_gemini_cli_resumes_every_repair_with_a_valid_request(
    name: str, resumed: dict[str, Any], figures: Figures
) -> None:
    outcome = resumed[name]
    if isinstance(outcome, BaseException):
        raise outcome
    failures = check_variants("Gemini CLI", name, outcome, "gemini", live_items, _injected, figures)
    assert not failures, "\n".join(failures)
