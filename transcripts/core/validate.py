"""Provider pairing rules, and the error texts providers answer when they are broken.

Texts are worded as each provider words them, as quoted in public bug reports
(see ../shared/reference/formats.md §1-§3 and integrity-semantics.md §4D):
Anthropic's Messages API, OpenAI Chat Completions (which spells "preceeding"),
OpenAI Responses and Gemini.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from transcripts.core.branch import live_context
from transcripts.core.model import Role, Transcript

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini", "bedrock")


def missing_text(provider: str, message: int, ids: Iterable[str]) -> str:
    """Return the provider's error for calls in request message `message` left unanswered."""
    joined = ", ".join(ids)
    if provider in ("anthropic", "bedrock"):
        return (
            f"messages.{message}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {joined}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )
    if provider == "openai_responses":
        return f"No tool output found for function call {joined}."
    if provider == "gemini":
        return (
            "Please ensure that the number of function response parts is equal to the number "
            "of function call parts of the function call turn."
        )
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        f"{joined}"
    )


def unexpected_text(provider: str, message: int, block: int, tool_call_id: str) -> str:
    """Return the provider's error for a result at `message`/`block` with no call right before."""
    if provider in ("anthropic", "bedrock"):
        return (
            f"messages.{message}.content.{block}: unexpected `tool_use_id` found in "
            f"`tool_result` blocks: {tool_call_id}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message."
        )
    if provider == "openai_responses":
        return f"No tool call found for function call output with call_id {tool_call_id}."
    if provider == "gemini":
        return (
            "Please ensure that function response turn comes immediately after a function call turn"
        )
    return (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        f"message with 'tool_calls'. (param: messages.[{message}].role)"
    )


def duplicate_text(provider: str, message: int, block: int, tool_call_id: str) -> str:
    """Return the provider's error for a second result of one call in the same message."""
    if provider in ("anthropic", "bedrock"):
        return (
            f"messages.{message}.content.{block}: each tool_use must have a single result. "
            f"Found multiple `tool_result` blocks with id: {tool_call_id}"
        )
    if provider == "openai_responses":
        return _responses_duplicate(tool_call_id)
    return unexpected_text(provider, message, block, tool_call_id)


def _responses_duplicate(tool_call_id: str) -> str:
    # As relayed in hermes-agent #102629 and mnfst/llm-gateway #2858.
    return (
        f"Duplicate function_call_output for call_id '{tool_call_id}'. Each function_call "
        "must have exactly one matching function_call_output"
    )


def reused_text(provider: str, message: int, block: int, tool_call_id: str) -> str:
    """Return the provider's error for a call id an earlier message of the request used."""
    if provider == "openai_responses":
        return _responses_duplicate(tool_call_id)
    return f"messages.{message}.content.{block}: `tool_use` ids must be unique"


# Anthropic's tool_use ids (and Bedrock's toolUseId) must match this pattern; an id
# carried over from an OpenAI model (`call_x|fc_y`) is refused with `pattern_text`.
_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def valid_id(tool_call_id: str) -> bool:
    """Return True when Anthropic and Bedrock take `tool_call_id` as a tool_use id."""
    return _ANTHROPIC_ID.fullmatch(tool_call_id) is not None


def pattern_text(message: int, block: int) -> str:
    """Return Anthropic's 400 text for a tool_use id outside `^[a-zA-Z0-9_-]+$`."""
    return (
        f"messages.{message}.content.{block}.tool_use.id: String should match "
        "pattern '^[a-zA-Z0-9_-]+$'"
    )


def bedrock_split_text(message: int, ids: Iterable[str]) -> str:
    """Return Bedrock's error for call results missing from user message `message`."""
    return (
        f"Expected toolResult blocks at messages.{message}.content for the following Ids: "
        + ", ".join(ids)
    )


def not_first_text(message: int, count: int) -> str:
    """Return Anthropic's error for tool results that do not open their user message."""
    return (
        f"messages.{message}: Did not find {count} `tool_result` block(s) at the beginning of "
        "this message. Messages following `tool_use` blocks must begin with a matching number "
        "of `tool_result` blocks."
    )


def _as_is(transcript: Transcript) -> bool:
    """Return True for Bedrock Converse messages, which are sent as written.

    Every other session reaches Bedrock through a converter (pi's, Claude
    Code's) that merges consecutive messages of one role, as Anthropic does.
    """
    return transcript.format == "bedrock"


def request_positions(
    transcript: Transcript, context: list[int], provider: str | None = None
) -> dict[int, tuple[int, int]]:
    """Map each record of `context` to (request message index, index of its first block).

    Anthropic merges consecutive messages of one role into one turn and takes
    `system` out of `messages`; Chat Completions and Bedrock Converse send every
    message as is. Records that one API response was split into (one
    `message_id`) are one message everywhere.
    """
    merge = (provider or transcript.provider) in ("anthropic", "bedrock") and not _as_is(transcript)
    positions: dict[int, tuple[int, int]] = {}
    message, blocks, last_role = -1, 0, None
    last_id: str | None = None
    for index in context:
        record = transcript.records[index]
        if record.role is Role.META or (merge and record.role is Role.SYSTEM):
            continue
        role = Role.USER if merge and record.role is Role.TOOL else record.role
        same_response = record.message_id is not None and record.message_id == last_id
        last_id = record.message_id
        if (merge or same_response) and role is last_role:
            positions[index] = (message, blocks)
        else:
            message, blocks = message + 1, 0
            positions[index] = (message, 0)
        blocks += max(1, len(record.calls) + len(record.results) + record.other_blocks)
        last_role = role
    return positions


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken pairing rule: the record it is found at and the provider's error text."""

    record: int
    tool_call_id: str
    error: str


@dataclass(slots=True)
class _Message:
    """One request message: consecutive records the provider reads as one."""

    index: int
    role: Role
    calls: list[tuple[int, int, str]]  # (record, block within the message, tool call id)
    results: list[tuple[int, int, str]]  # (record, block within the message, tool call id)
    late: set[tuple[int, int]]  # results written after other content of the message
    content_seen: bool = False
    families: dict[tuple[int, int], str] = field(default_factory=dict)


def _messages(transcript: Transcript, order: list[int], provider: str) -> list[_Message]:
    positions = request_positions(transcript, order, provider)
    messages: list[_Message] = []
    last: int | None = None
    last_role: Role | None = None
    for i in order:
        if i not in positions:
            continue
        record = transcript.records[i]
        message, first = positions[i]
        # A run of result-only messages (Chat Completions `tool` messages, or what a
        # converter makes of result blocks) answers the call message as one.
        previous = messages[-1] if messages else None
        # Separate tool messages (Chat Completions `tool`, pi `toolResult`) are batched by
        # every converter; result blocks in user contents are not merged by Gemini.
        joins = previous is not None and (
            message == last
            or (record.role is Role.TOOL and last_role is Role.TOOL)
            or (
                provider != "gemini"
                and not (provider == "bedrock" and _as_is(transcript))
                and bool(record.results)
                and not record.calls
                and not record.other_blocks
                and bool(previous.results)
                and not previous.calls
                and not previous.content_seen
            )
        )
        if not joins:
            role = Role.USER if record.role is Role.TOOL else record.role
            messages.append(_Message(message, role, [], [], set()))
        current = messages[-1]
        # Only an assistant message makes calls: a call block elsewhere is no call a
        # result answers (and `detect` sees none there either).
        if record.role is Role.ASSISTANT:
            current.calls.extend((i, first + c.block, c.id) for c in record.calls)
            current.families.update(
                ((i, first + c.block), c.family) for c in record.calls if c.family
            )
        current.results.extend((i, first + r.block, r.tool_call_id) for r in record.results)
        current.families.update(
            ((i, first + r.block), r.family) for r in record.results if r.family
        )
        taken = {r.block for r in record.results} | {c.block for c in record.calls}
        total = len(record.calls) + len(record.results) + record.other_blocks
        others = [j for j in range(total) if j not in taken]
        for r in record.results:
            if current.content_seen or (others and others[0] < r.block):
                current.late.add((i, first + r.block))
        current.content_seen = current.content_seen or bool(others)
        last, last_role = message, record.role
    return messages


def _leaders_alone(transcript: Transcript, order: list[int]) -> list[Violation]:
    """Return the reasoning items not followed by the item they produced."""
    records = transcript.records
    found = []
    for k, index in enumerate(order):
        if not records[index].leads:
            continue
        following = next(
            (records[i] for i in order[k + 1 :] if records[i].role is not Role.META), None
        )
        if following is None or following.role is not Role.ASSISTANT or following.leads:
            item = records[index].kind
            found.append(
                Violation(
                    index,
                    "",
                    f"Item of type '{item}' was provided without its required following item.",
                )
            )
    return found


def validate(
    transcript: Transcript,
    provider: str | None = None,
    *,
    context: list[int] | None = None,
    drops_aborted: bool = True,
) -> list[Violation]:
    """Return the pairing rules `transcript` breaks for `provider`, by record.

    `provider` is one of PROVIDERS (default: the session's own). Checks the
    records of `context` (default: the live context the runtime sends):
    Anthropic and Bedrock want tool_use ids unique across the request and
    in `^[a-zA-Z0-9_-]+$`, but for those the runtime rewrites itself for the
    session's own provider (`Transcript.rewritten_ids`); every
    call is answered exactly once; except on the Responses API, which takes an
    output anywhere after its call, the answers form the very next message,
    open it (Anthropic), and every result answers a call of the message right
    before it; Gemini wants as many responses as calls. Aborted and errored
    assistant frames are left out when the runtime drops them (`drops_aborted`,
    as pi-ai does). Shape: a list of Violation(record, tool_call_id, error),
    each error worded as the provider words it. Raises ValueError for an
    unknown provider.
    """
    provider = provider or transcript.provider
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; expected one of {PROVIDERS}")
    records = transcript.records
    order = list(context) if context is not None else live_context(transcript)
    if drops_aborted:
        order = [i for i in order if not records[i].aborted]
    adjacent = (
        transcript.adjacent if provider == transcript.provider else (provider != "openai_responses")
    )
    messages = _messages(transcript, order, provider)
    violations: list[Violation] = []
    seen_calls: set[str] = set()
    for message in messages:
        for rec, block, cid in message.calls:
            # Chat Completions accepts an id again in a later turn (case 13); Anthropic
            # wants every tool_use id unique across the request, Responses every call_id.
            if cid in seen_calls and provider in ("anthropic", "bedrock", "openai_responses"):
                text = reused_text(provider, message.index, block, cid)
                violations.append(Violation(rec, cid, text))
            # The runtime sends an id it rewrites in the provider's alphabet (pi, `rewritten_ids`).
            rewritten = provider == transcript.provider and rec in transcript.rewritten_ids
            if provider in ("anthropic", "bedrock") and not rewritten and not valid_id(cid):
                violations.append(Violation(rec, cid, pattern_text(message.index, block)))
            seen_calls.add(cid)
    if provider == "openai_responses":
        violations.extend(_leaders_alone(transcript, order))
    if not adjacent:
        # A result answers a call of its own family only (Codex custom tool calls).
        open_calls: set[tuple[str, str]] = set()
        answered: set[tuple[str, str]] = set()
        for message in messages:
            fam = message.families
            open_calls.update((cid, fam.get((rec, b), "")) for rec, b, cid in message.calls)
            for rec, block, cid in message.results:
                key = (cid, fam.get((rec, block), ""))
                if key in open_calls and key not in answered:
                    answered.add(key)
                elif transcript.server_history and key not in open_calls:
                    continue  # answers a call of the stored response it continues
                elif key in answered and provider == "openai_responses":
                    text = _responses_duplicate(cid)
                    violations.append(Violation(rec, cid, text))
                else:
                    violations.append(
                        Violation(rec, cid, unexpected_text(provider, message.index, block, cid))
                    )
        for message in messages:
            for rec, b, cid in message.calls:
                if (cid, message.families.get((rec, b), "")) not in answered:
                    violations.append(
                        Violation(rec, cid, missing_text(provider, message.index, [cid]))
                    )
        return violations
    for k, message in enumerate(messages):
        previous = messages[k - 1] if k else None
        expected = {cid for _, _, cid in previous.calls} if previous is not None else set()
        # A result written on its call (Gemini CLI) answers in the call's own message.
        expected |= {cid for _, _, cid in message.calls}
        got: set[str] = set()
        for rec, block, cid in message.results:
            if (rec, block) in message.late and provider in ("anthropic", "bedrock"):
                violations.append(Violation(rec, cid, not_first_text(message.index, len(expected))))
            elif cid in expected and cid not in got:
                got.add(cid)
            elif cid in got:
                violations.append(
                    Violation(rec, cid, duplicate_text(provider, message.index, block, cid))
                )
            else:
                violations.append(
                    Violation(rec, cid, unexpected_text(provider, message.index, block, cid))
                )
        if message.calls:
            following = messages[k + 1] if k + 1 < len(messages) else None
            answers = {cid for _, _, cid in following.results} if following else set()
            answers |= {cid for _, _, cid in message.results}
            missing = [(rec, cid) for rec, _, cid in message.calls if cid not in answers]
            for rec, cid in missing:
                violations.append(
                    Violation(
                        rec, cid, missing_text(provider, message.index, [c for _, c in missing])
                    )
                )
    violations.sort(key=lambda v: v.record)
    return violations
