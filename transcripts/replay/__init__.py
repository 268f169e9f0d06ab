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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from transcripts import formats
from transcripts.core.model import Transcript
from transcripts.core.validate import Violation, validate

__all__ = [
    "AGENTS",
    "CannotPreview",
    "Dropped",
    "Message",
    "Preview",
    "check_request",
    "message_text",
    "request_messages",
    "preview",
    "register",
]

# Provider id -> format id that reads a request body of that provider.
_REQUEST_FORMATS = {
    "anthropic": "anthropic",
    "openai_responses": "responses",
    "gemini": "gemini",
    "openai_chat": "openai_chat",
    "bedrock": "bedrock",
}


@dataclass(frozen=True, slots=True)
class Message:
    """One request message: its role (`user`, `assistant`, `tool`), texts, call and result ids."""

    role: str
    texts: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Dropped:
    """Something in the file the agent's loader or recovery does not send.

    `record` is the record index (as `formats.load` numbers records);
    `what` is `call`, `result`, `text` or `record`; `reason` says why in the
    agent's terms ("unanswered tool_use dropped on resume").
    """

    record: int
    what: str
    reason: str
    tool_call_id: str | None = None


@dataclass(slots=True)
class Preview:
    """What `agent` sends `provider` on resuming a file.

    `messages` are the request's messages in order; `violations` the
    provider's verdict (empty: the request is accepted); `dropped` what the
    agent silently leaves out; `added` what it writes in itself (synthetic
    results, "No response requested.").
    """

    agent: str
    provider: str
    messages: list[Message]
    violations: list[Violation] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    added: list[Message] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Return True when the provider accepts the request."""
        return not self.violations


Model = Callable[[Transcript], Preview]

# format id -> the function that models the agent that writes that format. Each
# agent's module registers itself; the imports at the end of this file load them.
AGENTS: dict[str, Model] = {}


def register(format_id: str) -> Callable[[Model], Model]:
    """Register the resume model of the agent that writes `format_id` files."""

    def decorator(fn: Model) -> Model:
        AGENTS[format_id] = fn
        return fn

    return decorator


class CannotPreview(ValueError):
    """The agent's loader cannot be modelled on this file (a record of a shape it never writes)."""


def preview(transcript: Transcript) -> Preview | None:
    """Return what the session's agent sends on resuming `transcript`, or None.

    None means the format is not an agent's own session file (a plain message
    list has no loader to model). Raises CannotPreview when a record has a
    shape the agent never writes (an id that is a list, content that is a
    number): what the agent does with it is not known, so nothing is claimed.
    """
    model = AGENTS.get(transcript.format)
    if model is None:
        return None
    try:
        return model(transcript)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, StopIteration) as exc:
        # The models read records as the agents write them; a hostile file may not be.
        raise CannotPreview(
            f"{transcript.filename or 'the file'} holds a record of a shape its agent never "
            f"writes ({type(exc).__name__}: {exc}); what the agent does with it is not "
            "modelled, so there is no resume preview"
        ) from exc


def _request_transcript(provider: str, body: dict[str, Any]) -> Transcript:
    try:
        fmt = _REQUEST_FORMATS[provider]
    except KeyError:
        raise ValueError(f"unknown provider {provider!r}") from None
    return formats.load(orjson.dumps(body), "request.json", fmt)


def check_request(provider: str, body: dict[str, Any]) -> list[Violation]:
    """Return the pairing rules a request body breaks, worded as `provider`'s 400 words them.

    `body` is the decoded JSON body the agent sent (`{"messages": [...]}`,
    `{"input": [...]}` or `{"contents": [...]}`). Raises ValueError for an
    unknown provider and `formats.FormatError` for a body that is not one.
    """
    transcript = _request_transcript(provider, body)
    return validate(transcript, provider, context=list(range(len(transcript.records))))


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


# The agents' modules register themselves; `_request` needs this module's names.
from transcripts.replay import claude_code, codex, gemini_cli, openclaw  # noqa: E402, F401
from transcripts.replay._request import message_text, request_messages  # noqa: E402
