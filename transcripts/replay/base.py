"""The resume preview's shapes, the agents' registry and the strict provider check.

The package `transcripts.replay` re-exports these names; each agent's module
imports them from here, so no module of the package imports the package itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transcripts import formats
from transcripts.core import jsontext
from transcripts.core.model import Transcript
from transcripts.core.validate import Violation, validate

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
    results, "No response requested."). `modelled_on` names the agent's
    npm package and the version whose code the model follows
    ("@anthropic-ai/claude-code 2.1.328"); other versions may differ.
    """

    agent: str
    provider: str
    messages: list[Message]
    violations: list[Violation] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    added: list[Message] = field(default_factory=list)
    modelled_on: str = ""

    @property
    def valid(self) -> bool:
        """Return True when the provider accepts the request."""
        return not self.violations


Model = Callable[[Transcript], Preview]

# format id -> the function that models the agent that writes that format. Each
# agent's module registers itself; importing transcripts.replay loads them.
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
    return formats.load(jsontext.dumps_compact(body), "request.json", fmt)


def check_request(provider: str, body: dict[str, Any]) -> list[Violation]:
    """Return the pairing rules a request body breaks, worded as `provider`'s 400 words them.

    `body` is the decoded JSON body the agent sent (`{"messages": [...]}`,
    `{"input": [...]}` or `{"contents": [...]}`). Raises ValueError for an
    unknown provider and `formats.FormatError` for a body that is not one.
    """
    transcript = _request_transcript(provider, body)
    return validate(transcript, provider, context=list(range(len(transcript.records))))


def written_by(transcript: Transcript) -> str | None:
    """Return the version of the agent that wrote `transcript`, where its file says, else None.

    Claude Code writes its `version` on each line (the last one's is taken:
    a resumed session is appended to by the version that resumed it); Codex
    writes `cli_version` in its `session_meta`. Other agents' files do not say.
    """
    if transcript.format == "claude_code":
        for record in reversed(transcript.records):
            version = record.obj.get("version") if isinstance(record.obj, dict) else None
            if isinstance(version, str):
                return version
    elif transcript.format == "codex":
        for record in transcript.records:
            obj = record.obj
            if isinstance(obj, dict) and obj.get("type") == "session_meta":
                payload = obj.get("payload")
                version = payload.get("cli_version") if isinstance(payload, dict) else None
                return version if isinstance(version, str) else None
    return None
