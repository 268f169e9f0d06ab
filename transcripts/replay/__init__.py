"""What an agent sends its provider when it resumes a session file: the resume preview.

Pure Python (no Django). Each agent whose file format Pairfix reads has a module
here that models the agent's own loader and resume-time recovery (which
records it reads, in what order, what it drops, what it adds), taken from the
agent's published source and checked against the real CLI by the agent tier
of the test suite (`tests/agents/`).

Shapes:

- `Message`: one request message as the provider receives it, reduced to what
  pairing and "nothing lost" need: its role, its texts, the tool call ids it
  calls and the tool call ids it answers, in order.
- `Preview`: the messages the agent will send, the provider's verdict on them
  (`violations`, worded as the provider words its 400), and what the agent's
  recovery silently drops or adds on the way.

`check_request(provider, body)` is the strict provider: the violations a
request body breaks, as the provider's 400 would word them.
"""

from __future__ import annotations

from transcripts.replay import claude_code, codex, gemini_cli, openclaw  # noqa: F401 (they register)
from transcripts.replay._request import message_text, request_messages
from transcripts.replay.base import (
    AGENTS,
    CannotPreview,
    Dropped,
    Message,
    Preview,
    check_request,
    preview,
    register,
)

__all__ = [
    "AGENTS",
    "CannotPreview",
    "Dropped",
    "Message",
    "Preview",
    "check_request",
    "describe",
    "kept_by",
    "message_text",
    "request_messages",
    "preview",
    "register",
]


def _things(dropped: list[Dropped]) -> str:
    counts: dict[str, int] = {}
    for item in dropped:
        counts[item.what] = counts.get(item.what, 0) + 1
    words = {"call": "tool call", "result": "tool result", "text": "text", "record": "record"}
    return ", ".join(
        f"{n} {words.get(what, what)}{'' if n == 1 else 's'}" for what, n in counts.items()
    )


def kept_by(repaired: Preview, dropped: list[Dropped]) -> list[Dropped]:
    """Return the calls and results of `dropped` (raw side) that `repaired`'s request carries."""
    calls = {c for m in repaired.messages for c in m.calls}
    results = {r for m in repaired.messages for r in m.results}
    return [
        d
        for d in dropped
        if d.tool_call_id is not None
        and (
            (d.what == "call" and d.tool_call_id in calls)
            or (d.what == "result" and d.tool_call_id in results)
        )
    ]


def describe(raw: Preview, repaired: Preview, policy: str) -> list[str]:
    """Return sentences comparing a raw resume with a repaired one, for people.

    E.g. "Claude Code would silently drop 2 tool calls of this file on resume;
    the repair under synthesize keeps them."
    """
    sentences = []
    verdict = "accepts" if raw.valid else "rejects"
    sentences.append(
        f"Resumed as it is, {raw.agent} sends {len(raw.messages)} messages and the provider "
        f"{verdict} them."
    )
    if raw.dropped:
        kept = kept_by(repaired, raw.dropped)
        if len(kept) == len(raw.dropped):
            tail = f"; the repair under {policy} keeps them"
        else:
            tail = f"; the repair under {policy} keeps {_things(kept)}" if kept else ""
        sentences.append(
            f"{raw.agent} would silently drop {_things(raw.dropped)} of this file on resume{tail}."
        )
    verdict = "accepts" if repaired.valid else "still rejects"
    sentences.append(
        f"Repaired under {policy}, it sends {len(repaired.messages)} messages and the provider "
        f"{verdict} them"
        + (f"; {raw.agent} still drops {_things(repaired.dropped)}." if repaired.dropped else ".")
    )
    return sentences
