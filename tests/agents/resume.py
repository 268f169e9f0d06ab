"""One agent-tier check: resume an input raw and repaired in a real agent CLI, then judge.

`check_input` runs the raw file and its repairs under `synthesize` and
`native` concurrently (each in its own HOME, against its own strict mock
provider), then asserts, per the issue:

(a) the request sent after resuming each repair passes the provider's pairing
    rules;
(b) every text and tool result of the raw file's live branch that the repair
    did not deliberately drop (an op says so) is in that request;
(c) the repair loses no tool call, text or real tool result that the agent's
    own recovery of the raw file keeps (when the provider refuses the raw
    request, except what an op of the repair deliberately drops);
(d) the resume preview (`transcripts.replay.preview`) matches each request.

An `Agent` says how to place a file, how to run the resume, and how to read the
file's texts and results.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import Figures, Outcome, Run, history_matches, run_cli
from tests.agents.provider import Captured, MockProvider
from transcripts import formats
from transcripts.core.branch import live_context
from transcripts.core.model import OpKind, Plan, Transcript
from transcripts.engine import analyze
from transcripts.replay import Message, check_request, preview, request_messages

PROMPT = "Continue."
POLICIES = ("synthesize", "native")


@dataclass
class Items:
    """What a file or a request holds: texts, tool call ids, (result id, canonical content)."""

    texts: set[str]
    calls: set[str]
    results: set[tuple[str, str]]


@dataclass
class Agent:
    """How the tier drives one agent CLI.

    `start(home, data, url)` places the session under `home`, returning the
    argv, the cwd and the extra environment; `history(messages)` turns the
    request's messages into what the preview models (removing what the agent
    adds for the new turn in place); `request_items(body)` and
    `file_items(transcript, indexes)` read texts, calls and results.
    """

    name: str
    provider: str
    start: Callable[[Path, bytes, str], tuple[list[str], Path, dict[str, str]]]
    request_items: Callable[[dict[str, Any]], Items]
    file_items: Callable[[Transcript, list[int], set[tuple[int, int | None]]], Items]
    history: Callable[[list[Message]], list[Message]] = lambda messages: messages


def canonical(value: Any) -> str:
    """Return a tool result's content as canonical JSON text, so equal contents compare equal."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass
class Resumed:
    run: Run
    request: Captured | None


def _resume(agent: Agent, home: Path, data: bytes) -> Resumed:
    provider = MockProvider(strict=True).start()
    try:
        argv, cwd, env = agent.start(home, data, provider.url)
        run = run_cli(argv, cwd=cwd, env=env)
        sent = provider.conversation_requests(agent.provider)
    finally:
        provider.close()
    return Resumed(run, sent[0] if sent else None)


def _dropped(plan: Plan) -> set[tuple[int, int | None]]:
    """Return (record, block) the plan deliberately drops; block None: the whole record."""
    out: set[tuple[int, int | None]] = set()
    for op in plan.ops:
        if op.kind in (OpKind.DROP_RESULT, OpKind.DROP_CALL) and op.record is not None:
            out.add((op.record, op.block))
        elif op.kind == OpKind.DROP_RECORD and op.record is not None:
            out.add((op.record, None))
    return out


def _renamed(plan: Plan) -> dict[str, str]:
    """Return {new id: old id} of the calls the plan renames (`rename_id` ops)."""
    return {
        op.text: op.call.id
        for op in plan.ops
        if op.kind == OpKind.RENAME_ID and op.call is not None and op.text
    }


def _under_old_ids(items: Items, renamed: dict[str, str]) -> Items:
    """Return `items` with each renamed id read as the id it had in the raw file.

    A rename keeps the exchange (call and result together) under a new id, so
    it is the same call and result the raw file holds.
    """
    return Items(
        items.texts,
        {renamed.get(c, c) for c in items.calls},
        {(renamed.get(r, r), content) for r, content in items.results},
    )


def check_input(agent: Agent, name: str, data: bytes, tmp_path: Path, figures: Figures) -> None:
    """Resume `data` raw and repaired in `agent`; assert (a)-(d); record the figures."""
    transcript = formats.load(data, name)
    variants = {"raw": data}
    plans = {}
    for policy in POLICIES:
        analysis = analyze(data, name, policy)
        variants[policy], plans[policy] = analysis.repaired, analysis.plan
    homes = {v: tmp_path / v / "home" for v in variants}
    with ThreadPoolExecutor(len(variants)) as pool:
        futures = {v: pool.submit(_resume, agent, homes[v], variants[v]) for v in variants}
        resumed = {v: f.result() for v, f in futures.items()}

    if all(r.request is None for r in resumed.values()):
        for variant in variants:
            figures.add(Outcome(agent.name, name, variant, opened=False, valid=False))
            shown = preview(formats.load(variants[variant], name))
            assert shown is not None and shown.messages == [], f"(d) {variant}: {shown}"
        pytest.skip(
            f"{agent.name} cannot open {name}, raw or repaired: {resumed['raw'].run.describe()}"
        )

    raw = resumed["raw"].request
    for variant, r in resumed.items():
        assert r.request is not None, f"{agent.name} sent nothing for {variant}: {r.run.describe()}"
    assert raw is not None
    raw_items = agent.request_items(raw.body)
    everything = list(range(len(transcript.records)))
    file_all = agent.file_items(transcript, everything, set())
    raw_valid = not check_request(agent.provider, raw.body)
    context = live_context(transcript)
    failures: list[str] = []
    figures.add(Outcome(agent.name, name, "raw", opened=True, valid=raw_valid))
    for variant, r in resumed.items():
        assert r.request is not None
        body = r.request.body
        sent = request_messages(agent.provider, body)
        shown = preview(formats.load(variants[variant], name))
        assert shown is not None
        if not history_matches(shown.messages, agent.history(sent)):
            failures.append(
                f"(d) {variant}: preview {shown.messages} != sent {agent.history(sent)}"
            )
        if variant == "raw":
            continue
        violations = check_request(agent.provider, body)
        if violations:
            failures.append(f"(a) {variant}: {violations[0].error}")
        items = _under_old_ids(agent.request_items(body), _renamed(plans[variant]))
        dropped = _dropped(plans[variant])
        owed = agent.file_items(transcript, context, dropped)
        missing_b = sorted(owed.texts - items.texts) + sorted(
            i for i, _ in owed.results - items.results
        )
        if missing_b:
            failures.append(f"(b) {variant} lost from the live branch: {missing_b[:5]}")
        kept_texts = raw_items.texts & file_all.texts
        kept_calls = set(raw_items.calls)
        kept_results = raw_items.results & file_all.results
        if not raw_valid:
            # The provider refuses what the agent kept: the repair may drop
            # what breaks the rules, as long as an op says so.
            left = agent.file_items(transcript, everything, dropped)
            kept_texts -= file_all.texts - left.texts
            kept_calls -= file_all.calls - left.calls
            kept_results -= file_all.results - left.results
        missing_c = (
            sorted(kept_texts - items.texts)
            + sorted(kept_calls - items.calls)
            + sorted(i for i, _ in kept_results - items.results)
        )
        if missing_c:
            failures.append(f"(c) {variant} lost what {agent.name} keeps: {missing_c[:5]}")
        total = len(owed.texts) + len(owed.results)
        figures.add(
            Outcome(
                agent.name,
                name,
                variant,
                opened=True,
                valid=not violations,
                texts=total,
                texts_kept=total - len(missing_b),
            )
        )
    assert not failures, "\n".join(failures)
