"""pi (@mariozechner/pi-coding-agent) resumes OpenClaw/pi session files, raw and repaired.

pi finds a session under `$PI_CODING_AGENT_DIR/sessions/--<cwd with / as ->--/`
(`getDefaultSessionDir`, core/session-manager.js) by the id in its header, and
refuses one whose header `cwd` does not exist, so the header's cwd is pointed
at the run's own folder (the conversation is untouched). `models.json`
re-points the built-in providers at the mock; retries are off so one
resume sends one request. Each input runs twice: with the session's own model
where that is an Anthropic one, and with `--model anthropic/claude-sonnet-4-5`
for every input, the strictest path through pi-ai's converter (another
model's thinking becomes text, call ids are rewritten to Anthropic's alphabet).
"""

from __future__ import annotations

import json
import subprocess
import sys
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
from transcripts import engine
from transcripts.core.model import Role, Transcript
from transcripts.replay import Preview
from transcripts.replay import openclaw as pi_model
from transcripts.replay.openclaw import PACKAGE

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "demo" / "samples"
GENERATOR = ROOT / "tools" / "gen_sessions.py"
HERE = Path(__file__).parent / "sessions"
FIXTURES = ROOT / "tests" / "formats" / "fixtures"
Model = Callable[[Transcript], Preview]
ANTHROPIC = pi_model.Target("anthropic", "anthropic-messages", "claude-sonnet-4-5")


@pytest.fixture(scope="module")
def pi_bin() -> Path:
    return npm.binary(npm.install(*PACKAGE), "pi")


def _placed(data: bytes, cwd: Path) -> tuple[str, bytes]:
    """Return (session id, bytes) of `data` with its header's cwd set to `cwd`."""
    first, _, rest = data.partition(b"\n")
    header = json.loads(first)
    header["cwd"] = str(cwd)
    return str(header["id"]), json.dumps(header).encode() + b"\n" + rest


def runner(pi: Path, extra: list[str], timeout: float = 45) -> Runner:
    """Return a runner that resumes a session in pi with `extra` arguments, `timeout` s at most."""

    def run(root: Path, data: bytes, mock: MockProvider) -> Run:
        home, cwd = root / "home", root / "work"
        cwd.mkdir(parents=True)
        agent_dir = home / ".pi" / "agent"
        session_id, placed = _placed(data, cwd)
        folder = agent_dir / "sessions" / ("--" + str(cwd).lstrip("/").replace("/", "-") + "--")
        folder.mkdir(parents=True)
        (folder / f"2025-12-01T09-00-00-000Z_{session_id}.jsonl").write_bytes(placed)
        urls = {"anthropic": mock.url, "openai": mock.url + "/v1", "google": mock.url + "/v1beta"}
        models = {"providers": {name: {"baseUrl": url} for name, url in urls.items()}}
        (agent_dir / "models.json").write_text(json.dumps(models))
        settings = {"retry": {"enabled": False, "provider": {"maxRetries": 0}}}
        (agent_dir / "settings.json").write_text(json.dumps(settings))
        env = base_env(
            home,
            PI_CODING_AGENT_DIR=str(agent_dir),
            PI_SKIP_VERSION_CHECK="1",
            ANTHROPIC_API_KEY="sk-ant-dummy",
            OPENAI_API_KEY="sk-dummy",
            GEMINI_API_KEY="dummy",
        )
        argv = [str(pi), "-p", "--session", session_id, *extra, PROMPT]
        return run_cli(argv, cwd=cwd, env=env, timeout=timeout)

    return run


def live_items(transcript: Transcript, live: set[int], dropped: set[tuple[int, int]]) -> Items:
    """Return the texts of the user and assistant messages and the result ids of `live`.

    Result ids as pi sends them to Anthropic (the ids of another provider's calls
    rewritten to its alphabet; Anthropic's own are unchanged by it).
    """
    out = Items()
    for index in live:
        record = transcript.records[index]
        message = record.obj.get("message") if isinstance(record.obj, dict) else None
        if not isinstance(message, dict):
            continue
        if record.role in (Role.USER, Role.ASSISTANT):
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks if isinstance(blocks, list) else []:
                text = block.get("text") if isinstance(block, dict) else None
                if isinstance(text, str) and block.get("type") == "text" and text.strip():
                    out.texts.add(text.strip())
        for result in record.results:
            if (index, result.block) not in dropped:
                out.results.add(pi_model.normalize_id(result.tool_call_id, "anthropic"))
    return out


def _generated(tmp: Path, seed: int, fault_rate: float) -> bytes:
    out = tmp / f"gen-{seed}.jsonl"
    subprocess.run(
        [sys.executable, str(GENERATOR), "--format", "openclaw", "--records", "40"]
        + ["--seed", str(seed), "--fault-rate", str(fault_rate), "--result-bytes", "50:400"]
        + ["--out", str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out.read_bytes()


INPUTS = [
    "formats/openclaw.jsonl",
    "cases/08_pi-aborted-toolcall-then-user.jsonl",
    "cases/10_openclaw-displaced-dup-orphan-results.jsonl",
    "own/partial-json-leftover.jsonl",
    "own/result-parent-is-call-id.jsonl",
    "own/compaction-orphan.jsonl",
    "own/pi_displaced_result_logged_twice.jsonl",
    "own/pi_calls_parent_missing.jsonl",
    "own/pi_result_parent_missing.jsonl",
    "own/pi_result_parent_missing_after_later_turns.jsonl",
    "own/pi_result_parent_null_mid_branch.jsonl",
    "fixtures/openclaw_model_switch_openai_ids.jsonl",
    "gen/seed-11-faults",
    "gen/seed-12-healthy",
]


def _input(name: str, tmp: Path) -> bytes:
    if name.startswith("gen/"):
        seed = int(name.split("-")[1])
        return _generated(tmp, seed, 0.0 if name.endswith("healthy") else 0.6)
    if name.startswith("own/"):
        return (HERE / name.removeprefix("own/")).read_bytes()
    if name.startswith("fixtures/"):
        return (FIXTURES / name.removeprefix("fixtures/")).read_bytes()
    return (SAMPLES / name).read_bytes()


def _own_model(data: bytes) -> bool:
    """Return True when the session's own model is an Anthropic one other than ANTHROPIC."""
    own = pi_model.session_target(engine.formats.load(data, "s.jsonl", "openclaw"))
    return own is not None and own.api == "anthropic-messages" and own != ANTHROPIC


@pytest.fixture(scope="module")
def resumed(pi_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Return {(input, mode): {variant: Resumed}}: every input resumed raw and repaired, together.

    Mode `anthropic` runs `--model anthropic/claude-sonnet-4-5`; mode `own` the
    session's own model, where it is another Anthropic one (pi's
    OpenAI-Responses path is not reduced here).
    """
    root = tmp_path_factory.mktemp("pi")
    jobs: dict[str, Callable[[], dict[str, Resumed]]] = {}

    def job(key: str, name: str, data: bytes, extra: list[str], model: Model) -> None:
        folder = root / str(len(jobs))
        jobs[key] = lambda: resume_variants(
            runner(pi_bin, extra), folder, data, Path(name).name, "anthropic", "openclaw", model
        )

    for name in INPUTS:
        data = _input(name, root)
        job(
            f"{name} anthropic",
            name,
            data,
            ["--model", "anthropic/claude-sonnet-4-5"],
            lambda t: pi_model.preview_for(t, ANTHROPIC),
        )
        if _own_model(data):
            job(f"{name} own", name, data, [], pi_model.preview)
    return resume_inputs(jobs)


@pytest.mark.parametrize("name", INPUTS)
def test_pi_resumes_every_repair_with_a_valid_request_keeping_what_pi_keeps(
    name: str, resumed: dict[str, Any], figures: Figures
) -> None:
    failures = []
    for mode, agent in (("anthropic", "pi (anthropic)"), ("own", "pi")):
        outcome = resumed.get(f"{name} {mode}")
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            failures += check_variants(
                agent, name, outcome, "anthropic", live_items, _none, figures
            )
    assert not failures, "\n".join(failures)


def _none(text: str) -> bool:
    return False


# A toolResult whose parentId names no entry (or is null) -> (its call id, the user texts
# written after the call, which pi sent none of from the file as it was).
LOST_RESULTS = {
    "own/pi_result_parent_missing_after_later_turns.jsonl": (
        "toolu_01Pm5xxxxxxxxxxxxxxxxxxx",
        ["What port does the server use?", "Also check the log level."],
    ),
    "own/pi_result_parent_null_mid_branch.jsonl": (
        "toolu_01Nu6xxxxxxxxxxxxxxxxxxx",
        ["What port does the server use?", "Please hurry.", "Thanks."],
    ),
}


@pytest.mark.parametrize("name", sorted(LOST_RESULTS))
def test_pi_sends_a_lost_result_put_back_under_its_call_with_every_turn(
    name: str, resumed: dict[str, Any]
) -> None:
    """One repair moves the result under its call: pi sends its output and the later turns.

    Dropped as an orphan, the output was lost; only re-pointed at its call but
    left last, the result was pi's leaf and the turns after the call went unsent.
    """
    call_id, texts = LOST_RESULTS[name]
    outcome = resumed[f"{name} anthropic"]
    for variant in ("synthesize", "native"):
        request = outcome[variant].request
        assert request is not None, variant
        blocks = [
            block
            for message in request.body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
        ]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        assert [b["tool_use_id"] for b in results] == [call_id], variant
        assert "port = 8080" in json.dumps(results[0]["content"]), variant
        sent = [b["text"] for b in blocks if b.get("type") == "text"]
        assert [t for t in sent if t in texts] == texts, variant


def test_pi_hangs_on_a_parent_loop_and_resumes_it_repaired(pi_bin: Path, tmp_path: Path) -> None:
    """As written, pi never sends a request (its walk goes round); repaired, it sends the branch.

    The prompt's parentId names the call after it (l0000001 -> l0000002 ->
    l0000001): pi's `buildSessionContext` walks that loop until it is killed.
    """
    data = (HERE / "pi_parent_loop.jsonl").read_bytes()
    analysis = engine.analyze(data, "loop.jsonl", "synthesize", format="openclaw", grace=0)
    assert analysis.fault_counts == {"parent_loop": 1}
    extra = ["--model", "anthropic/claude-sonnet-4-5"]
    for variant, content, timeout in (("raw", data, 15), ("repaired", analysis.repaired, 45)):
        mock = MockProvider(strict=True).start()
        try:
            run = runner(pi_bin, extra, timeout)(tmp_path / variant, content, mock)
            found = mock.conversation_requests("anthropic")
        finally:
            mock.close()
        if variant == "raw":
            assert run.timed_out and not found, run.describe()
            continue
        assert found, run.describe()
        messages = found[0].body["messages"]
        blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
        first = messages[0]["content"]
        texts = [first] if isinstance(first, str) else [b.get("text") for b in first]
        assert "What port does the server use?" in texts
        assert [b["id"] for b in blocks if b.get("type") == "tool_use"] == [
            "toolu_01Lp1xxxxxxxxxxxxxxxxxxx"
        ]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        assert [b["tool_use_id"] for b in results] == ["toolu_01Lp1xxxxxxxxxxxxxxxxxxx"]
        assert "port = 8080" in json.dumps(results[0]["content"])
