"""What the pi and Gemini CLI tests share: resuming one input raw and repaired, and the checks.

`resume_variants` runs the agent on the raw file and on its repair under each
policy (identical bytes run once), concurrently, each run with its own HOME and
its own strict `MockProvider`. `check_variants` then makes the tier's four
assertions (see tests/agents/README in agents.md terms):

(a) the request after resuming a repaired file passes the provider's pairing
    rules (`check_request`);
(b) every text and tool result of the raw file's live branch that no op of the
    repair drops, and that the agent itself does not drop (the preview's
    `dropped`), is in that request;
(c) every text, call and result that the agent's own recovery of the raw file
    sends (a result only where its call is sent too) is in that request;
(d) the preview (`transcripts.replay.preview`) has the request's messages
    (`transcripts.replay.request_messages` reduces the body).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agents.conftest import Figures, Outcome, Run
from tests.agents.provider import Captured, MockProvider
from transcripts import engine
from transcripts.core.branch import live_context
from transcripts.core.model import OpKind, Transcript
from transcripts.replay import Message, Preview, check_request, request_messages

PROMPT = "Continue."
POLICIES = ("synthesize", "native")
_REQUEST_KEYS = {"anthropic": "messages", "gemini": "contents"}


def result_contents(provider: str, body: dict[str, Any]) -> dict[str, set[str]]:
    """Return {tool call id: the contents of its results} of a request body, as text.

    Anthropic: a `tool_result`'s content (its text blocks joined by newlines);
    Gemini: a `functionResponse`'s `response` as sorted JSON.
    """
    out: dict[str, set[str]] = {}
    if provider == "anthropic":
        for m in body.get("messages", []):
            content = m.get("content")
            for b in content if isinstance(content, list) else []:
                if b.get("type") != "tool_result":
                    continue
                value = b.get("content")
                if isinstance(value, list):
                    value = "\n".join(str(x.get("text", "")) for x in value if isinstance(x, dict))
                out.setdefault(str(b.get("tool_use_id")), set()).add(str(value or "").strip())
    elif provider == "gemini":
        for c in body.get("contents", []):
            for p in c.get("parts", []):
                if "functionResponse" in p:
                    response = p["functionResponse"]
                    text = json.dumps(response.get("response"), sort_keys=True)
                    out.setdefault(str(response.get("id") or ""), set()).add(text)
    return out


def lost_contents(
    provider: str,
    raw: dict[str, Any],
    repaired: dict[str, Any],
    answered: set[str],
    added: set[str],
) -> list[str]:
    """Return the calls of `answered` whose results the agent sent raw and not repaired.

    A call counts when none of its raw result contents (those the agent wrote
    itself, `added`, aside) is among the repaired request's: the repair may
    keep one of two duplicates, but must not swap a real result the agent
    sends for a synthetic one under the same id.
    """
    before, after = result_contents(provider, raw), result_contents(provider, repaired)
    lost = []
    for call in sorted(answered):
        real = before.get(call, set()) - added
        if real and not real & after.get(call, set()):
            lost.append(f"result content of {call}: {sorted(real)[0][:80]!r}")
    return lost


def without_injected(messages: list[Message], injected: Callable[[str], bool]) -> list[Message]:
    """Return `messages` without the texts the agent adds itself (its prompt, its context).

    The new prompt is the last text of the request; `injected` names the other
    texts the agent writes in (Gemini CLI's `<session_context>`). A message
    left empty goes.
    """
    out = [
        Message(m.role, tuple(t for t in m.texts if not injected(t)), m.calls, m.results)
        for m in messages
    ]
    if out and out[-1].texts and out[-1].texts[-1] == PROMPT:
        last = out[-1]
        out[-1] = Message(last.role, last.texts[:-1], last.calls, last.results)
    return [m for m in out if m.texts or m.calls or m.results]


@dataclass
class Resumed:
    """One agent run on one file: the file, the preview of it, the run and its request."""

    variant: str
    data: bytes
    transcript: Transcript
    preview: Preview
    run: Run
    request: Captured | None
    analysis: engine.Analysis | None = None

    @property
    def opened(self) -> bool:
        return self.request is not None


Runner = Callable[[Path, bytes, MockProvider], Run]


def _resume_one(
    runner: Runner, root: Path, variant: str, data: bytes, name: str, provider: str
) -> tuple[Run, Captured | None]:
    mock = MockProvider(strict=True).start()
    try:
        run = runner(root / variant, data, mock)
        found = mock.conversation_requests(provider)
    finally:
        mock.close()
    # Without retries the agent sends one conversation request; the first is the resume.
    return run, found[0] if found else None


def resume_variants(
    runner: Runner,
    root: Path,
    data: bytes,
    name: str,
    provider: str,
    fmt: str,
    model: Callable[[Transcript], Preview],
    policies: tuple[str, ...] = POLICIES,
) -> dict[str, Resumed]:
    """Resume `data` raw and repaired under each policy; return {variant: Resumed}.

    `model` is the resume preview to hold the agent to (for pi with another
    model than the session's, `replay.openclaw.preview_for`); `policies` the
    repairs to resume.
    """
    files: dict[str, tuple[bytes, engine.Analysis | None]] = {"raw": (data, None)}
    for policy in policies:
        analysis = engine.analyze(data, name, policy, format=fmt)
        assert analysis.error is None, analysis.error
        files[policy] = (analysis.repaired, analysis)
    distinct: dict[bytes, str] = {}
    for variant, (content, _) in files.items():
        distinct.setdefault(content, variant)
    with ThreadPoolExecutor(max_workers=len(distinct)) as pool:
        futures = {
            content: pool.submit(_resume_one, runner, root, variant, content, name, provider)
            for content, variant in distinct.items()
        }
        done = {content: future.result() for content, future in futures.items()}
    out = {}
    for variant, (content, analysis) in files.items():
        transcript = engine.formats.load(content, name, fmt)
        preview = model(transcript)
        run, request = done[content]
        out[variant] = Resumed(variant, content, transcript, preview, run, request, analysis)
    shutil.rmtree(root, ignore_errors=True)
    return out


@dataclass
class Items:
    """Texts, call ids and result ids, as sets (what "kept" compares)."""

    texts: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)

    def missing_from(self, other: Items) -> list[str]:
        return sorted(
            [f"text {t!r}" for t in self.texts - other.texts]
            + [f"call {c}" for c in self.calls - other.calls]
            + [f"result {r}" for r in self.results - other.results]
        )

    @property
    def size(self) -> int:
        return len(self.texts) + len(self.calls) + len(self.results)


def items(messages: list[Message], answered_only: bool = False) -> Items:
    """Return the items of `messages`; with `answered_only`, results only of calls sent too."""
    calls = {c for m in messages for c in m.calls}
    results = {r for m in messages for r in m.results}
    texts = {t.strip() for m in messages for t in m.texts if t.strip()}
    return Items(texts, calls, results & calls if answered_only else results)


LiveItems = Callable[[Transcript, set[int], set[tuple[int, int]]], Items]


def raw_live_items(
    transcript: Transcript, analysis: engine.Analysis, agent_drops: set[int], texts: LiveItems
) -> Items:
    """Return the raw live branch's texts and results that the repair must keep.

    Leaves out what an op drops (a record, or one call or result block) and the
    records the agent itself drops on resume (`agent_drops`); `texts` reads a
    format's texts and results of the remaining records.
    """
    dropped_records = set(agent_drops)
    dropped_blocks: set[tuple[int, int]] = set()
    for op in analysis.plan.ops:
        if op.kind is OpKind.DROP_RECORD and op.record is not None:
            dropped_records.add(op.record)
        elif op.kind in (OpKind.DROP_RESULT, OpKind.DROP_CALL) and op.block is not None:
            assert op.record is not None
            dropped_blocks.add((op.record, op.block))
    live = set(live_context(transcript)) - dropped_records
    return texts(transcript, live, dropped_blocks)


def resume_inputs(
    jobs: dict[str, Callable[[], dict[str, Resumed]]], workers: int = 3
) -> dict[str, dict[str, Resumed] | BaseException]:
    """Run `jobs` ({input: resume_variants call}) `workers` at a time; return their outcomes.

    The agents spend most of a resume waiting (on Node's start, on the disk),
    so a module's inputs resume together rather than one test after another.
    An input whose resume raised maps to the exception, for its test to raise.
    """
    out: dict[str, dict[str, Resumed] | BaseException] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        for name, future in futures.items():
            try:
                out[name] = future.result()
            except Exception as exc:  # reported by the input's own test
                out[name] = exc
    return out


def check_variants(
    agent: str,
    label: str,
    resumed: dict[str, Resumed],
    provider: str,
    live_texts: LiveItems,
    injected: Callable[[str], bool],
    figures: Figures,
) -> list[str]:
    """Make the four checks on `resumed`; record an `Outcome` per variant; return the failures.

    An input the agent cannot open raw and repaired alike is recorded as such
    and fails nothing.
    """
    failures: list[str] = []
    raw = resumed["raw"]
    if not any(r.opened for r in resumed.values()):
        for variant, r in resumed.items():
            figures.add(Outcome(agent, label, variant, False, False, note=r.run.describe()[-300:]))
        return []
    raw_sent = request_messages(provider, raw.request.body) if raw.request is not None else []
    raw_kept = items(without_injected(raw_sent, injected), answered_only=True)
    for variant, r in resumed.items():
        where = f"{agent} {label} {variant}"
        if r.request is None:
            failures.append(f"{where}: no request\n{r.run.describe()}")
            figures.add(Outcome(agent, label, variant, False, False))
            continue
        body = r.request.body
        violations = check_request(provider, body)
        sent = without_injected(request_messages(provider, body), injected)
        if sent != r.preview.messages:
            failures.append(f"{where}: preview {r.preview.messages} != request {sent}")
        if variant == "raw":
            figures.add(Outcome(agent, label, variant, True, not violations))
            continue
        if violations:
            failures.append(f"{where}: request invalid: {violations[0].error}")
        assert r.analysis is not None
        agent_drops = {d.record for d in r.preview.dropped}
        must = raw_live_items(raw.transcript, r.analysis, agent_drops, live_texts)
        got = items(sent)
        lost = must.missing_from(got)
        if lost:
            failures.append(f"{where}: lost from the raw live branch: {lost}")
        if raw.request is not None:
            # The results' contents too: a repair that swaps a result the agent keeps
            # for a synthetic one under the same id loses it all the same.
            added = {t for m in raw.preview.added for t in m.texts}
            lost_kept = raw_kept.missing_from(got) + lost_contents(
                provider, raw.request.body, body, raw_kept.results, added
            )
            if lost_kept:
                failures.append(f"{where}: lost what {agent} keeps of the raw file: {lost_kept}")
        kept = must.size - len(lost)
        figures.add(
            Outcome(agent, label, variant, True, not violations, must.size, kept, note=str(lost))
        )
    return failures
