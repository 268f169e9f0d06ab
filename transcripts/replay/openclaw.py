"""pi (and OpenClaw, which embeds it) resuming a session file: what it sends its provider.

Modelled on @mariozechner/pi-coding-agent 0.73.1 and its @mariozechner/pi-ai:

- `SessionManager.buildSessionContext` (core/session-manager.js): lines that
  are not JSON are skipped; the leaf is the last entry of the file, and the
  conversation is the path from it to the root along `parentId`. A
  `compaction` on that path sends its summary first, then the entries from its
  `firstKeptEntryId` up to it, then the ones after it. `custom_message` and
  `branch_summary` entries become user messages (`convertToLlm`, core/messages.js).
- `transformMessages` (pi-ai providers/transform-messages.js): an assistant
  message that errored or was aborted (`stopReason` `error` / `aborted`) is
  left out whole; a `toolCall` that no `toolResult` answers before the next
  assistant or user message gets a synthetic error result "No result
  provided"; duplicate and orphaned results are kept as they are. Sent to
  another model than the one that wrote it, a thinking block becomes text and
  a call id is rewritten to the target provider's alphabet (Anthropic:
  `[a-zA-Z0-9_-]`, at most 64 characters); the results' ids follow only where
  the call came first.
- The Anthropic converter (pi-ai providers/anthropic.js `convertMessages`):
  empty texts are dropped (and a message left empty), thinking without a
  signature is sent as text, consecutive tool results share one user message.
  The other providers' converters group results the same way for Gemini and
  one message per result for OpenAI.

`preview` models the resume with the session's own model; `preview_for` with
another (`pi --model anthropic/<id>`), the strictest path through the converter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from transcripts.core.model import Transcript
from transcripts.core.validate import Violation
from transcripts.formats.openclaw import PROVIDER_APIS, pi_anthropic_id
from transcripts.replay._request import message_text
from transcripts.replay.base import Dropped, Message, Preview, check_request, register

# The npm package and version whose code this model follows (the agent tier installs it).
PACKAGE = ("@mariozechner/pi-coding-agent", "0.73.1")
MODELLED_ON = " ".join(PACKAGE)

__all__ = ["NO_RESULT", "Target", "normalize_id", "preview", "preview_for", "session_target"]

NO_RESULT = "No result provided"
_COMPACTION = (
    "The conversation history before this point was compacted into the following summary:\n\n"
    "<summary>\n",
    "\n</summary>",
)
_BRANCH = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n",
    "</summary>",
)
# pi-ai `api` id -> the provider whose request the converter writes.
_APIS = {
    "anthropic-messages": "anthropic",
    "openai-responses": "openai_responses",
    "openai-codex-responses": "openai_responses",
    "azure-openai-responses": "openai_responses",
    "openai-completions": "openai_chat",
    "google-generative-ai": "gemini",
    "google-gemini-cli": "gemini",
    "google-vertex": "gemini",
}


@dataclass(frozen=True, slots=True)
class Target:
    """The model pi sends to: pi's provider name, its `api` id and the model id."""

    provider: str
    api: str
    model: str


@dataclass(slots=True)
class _Msg:
    """One pi `AgentMessage` after `convertToLlm`, with the record it came from."""

    role: str  # user, assistant, toolResult
    record: int
    body: dict[str, Any]


def _entries(transcript: Transcript) -> list[tuple[int, dict[str, Any]]]:
    """Return (record index, entry) of every line pi parses (its header included)."""
    return [(r.index, r.obj) for r in transcript.records if isinstance(r.obj, dict)]


def _path(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Return the entries from the root to the last entry, along `parentId` (pi's leaf walk)."""
    if len(entries) < 2 or entries[0][1].get("type") != "session":
        return []
    body = entries[1:]
    by_id = {e.get("id"): (i, e) for i, e in body}
    path: list[tuple[int, dict[str, Any]]] = []
    seen: set[int] = set()
    current: tuple[int, dict[str, Any]] | None = body[-1]
    while current is not None and current[0] not in seen:
        seen.add(current[0])
        path.append(current)
        parent = current[1].get("parentId")
        current = by_id.get(parent) if parent else None
    path.reverse()
    return path


def _loop_top(entries: list[tuple[int, dict[str, Any]]]) -> int | None:
    """Return the record whose `parentId` sends pi's leaf walk back round a loop, or None.

    pi's walk (`buildSessionContext`, `while (current)`) has no guard: on
    such a link it never ends, and pi never sends a request. That record is
    the first `_path` gives, its parent an entry the walk passed already.
    """
    path = _path(entries)
    if not path:
        return None
    index, top = path[0]
    parent = top.get("parentId")
    held = {e.get("id"): i for i, e in entries[1:]}
    return index if parent and held.get(parent) in {i for i, _ in path} else None


def session_target(transcript: Transcript) -> Target | None:
    """Return the model pi restores for the session (the last one on its path), or None."""
    target = None
    for _, entry in _path(_entries(transcript)):
        if entry.get("type") == "model_change":
            provider = str(entry.get("provider"))
            target = Target(provider, PROVIDER_APIS.get(provider, ""), str(entry.get("modelId")))
        elif entry.get("type") == "message" and isinstance(entry.get("message"), dict):
            message = entry["message"]
            if message.get("role") == "assistant":
                provider = str(message.get("provider"))
                api = PROVIDER_APIS.get(provider, str(message.get("api")))
                target = Target(provider, api, str(message.get("model")))
    return target


def _messages(transcript: Transcript) -> list[_Msg]:
    """Return the session's messages as `buildSessionContext` and `convertToLlm` give them."""
    path = _path(_entries(transcript))
    compaction = None
    for k, (_, entry) in enumerate(path):
        if entry.get("type") == "compaction":
            compaction = k
    out: list[_Msg] = []

    def append(index: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("message"), dict):
            message = entry["message"]
            role = message.get("role")
            if role in ("user", "assistant", "toolResult"):
                out.append(_Msg(str(role), index, message))
            elif role in ("custom", "bashExecution", "branchSummary", "compactionSummary"):
                out.append(_Msg("user", index, {"content": _special_text(message)}))
        elif kind == "custom_message":
            out.append(_Msg("user", index, {"content": entry.get("content")}))
        elif kind == "branch_summary" and entry.get("summary"):
            text = _BRANCH[0] + str(entry["summary"]) + _BRANCH[1]
            out.append(_Msg("user", index, {"content": [{"type": "text", "text": text}]}))

    if compaction is None:
        for index, entry in path:
            append(index, entry)
        return out
    index, entry = path[compaction]
    summary = _COMPACTION[0] + str(entry.get("summary", "")) + _COMPACTION[1]
    out.append(_Msg("user", index, {"content": [{"type": "text", "text": summary}]}))
    keep = entry.get("firstKeptEntryId")
    kept = False
    for index, entry in path[:compaction]:
        kept = kept or entry.get("id") == keep
        if kept:
            append(index, entry)
    for index, entry in path[compaction + 1 :]:
        append(index, entry)
    return out


def _special_text(message: dict[str, Any]) -> Any:
    role = message.get("role")
    if role == "compactionSummary":
        return [
            {"type": "text", "text": _COMPACTION[0] + str(message.get("summary")) + _COMPACTION[1]}
        ]
    if role == "branchSummary":
        return [{"type": "text", "text": _BRANCH[0] + str(message.get("summary")) + _BRANCH[1]}]
    if role == "bashExecution":
        # Rarely in a resumed file; its text is pi's own rendering of the command.
        return [{"type": "text", "text": f"Ran `{message.get('command')}`"}]
    return message.get("content")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _same_model(message: dict[str, Any], target: Target) -> bool:
    return (
        message.get("provider") == target.provider
        and message.get("api") == target.api
        and message.get("model") == target.model
    )


def normalize_id(call_id: str, provider: str) -> str:
    """Return `call_id` as pi-ai rewrites it for `provider` when another model wrote it."""
    if provider == "anthropic":
        return pi_anthropic_id(call_id)
    return call_id


@dataclass(slots=True)
class _Out:
    """A message of the request being built: role, texts, call ids, result ids."""

    role: str
    texts: list[str]
    calls: list[str]
    results: list[str]

    def freeze(self) -> Message:
        return Message(self.role, tuple(self.texts), tuple(self.calls), tuple(self.results))


def _convert(
    transcript: Transcript, target: Target, provider: str
) -> tuple[list[Message], list[Dropped], list[Message]]:
    """Return (request messages, what pi drops, what it adds) for `target` on `provider`."""
    dropped: list[Dropped] = []
    added: list[Message] = []
    id_map: dict[str, str] = {}
    # transformMessages, first pass and synthetic results in one walk.
    flow: list[tuple[str, Any]] = []  # ("user", texts) ("assistant", (texts, calls)) ("result", id)
    pending: list[str] = []
    answered: set[str] = set()

    def settle() -> None:
        nonlocal pending, answered
        for call in pending:
            if call not in answered:
                flow.append(("result", (call, NO_RESULT)))
                added.append(Message("tool", (NO_RESULT,), (), (call,)))
        pending, answered = [], set()

    for msg in _messages(transcript):
        body = msg.body
        if msg.role == "assistant":
            settle()
            same = _same_model(body, target)
            blocks = _blocks(body.get("content"))
            if body.get("stopReason") in ("error", "aborted"):
                reason = f"pi drops an assistant turn that stopped with {body.get('stopReason')!r}"
                for block in blocks:
                    if block.get("type") == "toolCall":
                        cid = str(block.get("id"))
                        dropped.append(Dropped(msg.record, "call", reason, cid))
                dropped.append(Dropped(msg.record, "record", reason))
                continue
            texts, calls = [], []
            for block in blocks:
                kind = block.get("type")
                if kind == "text":
                    texts.append(str(block.get("text", "")))
                elif kind == "thinking":
                    thinking = str(block.get("thinking") or "")
                    signed = bool(str(block.get("thinkingSignature") or "").strip())
                    if block.get("redacted") or not thinking.strip():
                        continue
                    # Another model's thinking is text; Anthropic sends unsigned thinking as text.
                    if not same or (provider == "anthropic" and not signed):
                        texts.append(thinking)
                elif kind == "toolCall":
                    cid = str(block.get("id"))
                    if not same:
                        new = normalize_id(cid, provider)
                        if new != cid:
                            id_map[cid] = new
                        cid = new
                    calls.append(cid)
            pending = calls
            answered = set()
            flow.append(("assistant", (texts, calls)))
        elif msg.role == "toolResult":
            cid = str(body.get("toolCallId"))
            cid = id_map.get(cid, cid)
            answered.add(cid)
            flow.append(("result", (cid, _joined(body.get("content")))))
        else:
            settle()
            blocks = _blocks(body.get("content"))
            flow.append(("user", [b.get("text", "") for b in blocks if b.get("type") == "text"]))
    settle()
    return _group(flow, provider), dropped, added


def _joined(content: Any) -> str:
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def _group(flow: list[tuple[str, Any]], provider: str) -> list[Message]:
    """Return the request's messages: empty texts dropped, results grouped as `provider` does."""
    out: list[_Out] = []
    for kind, value in flow:
        if kind == "user":
            texts = [message_text(t) for t in value if message_text(t)]
            if texts:
                out.append(_Out("user", texts, [], []))
        elif kind == "assistant":
            texts, calls = value
            texts = [message_text(t) for t in texts if message_text(t)]
            if texts or calls:
                out.append(_Out("assistant", texts, list(calls), []))
        else:
            cid, _ = value
            last = out[-1] if out else None
            if (
                provider in ("anthropic", "gemini")
                and last is not None
                and last.results
                and not last.texts
            ):
                last.results.append(cid)
            else:
                role = "user" if provider in ("anthropic", "gemini") else "tool"
                out.append(_Out(role, [], [], [cid]))
    return [m.freeze() for m in out]


def _request_body(messages: list[Message], provider: str) -> dict[str, Any]:
    """Return a request body of `provider` carrying `messages`, for the provider's verdict."""
    if provider == "anthropic":
        return {"messages": [_anthropic(m) for m in messages]}
    if provider == "gemini":
        return {"contents": [_gemini(m) for m in messages]}
    items: list[dict[str, Any]] = []
    if provider == "openai_responses":
        for m in messages:
            items.extend(_responses(m))
        return {"input": items}
    return {"messages": [_chat(m) for m in messages]}


def _anthropic(m: Message) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": r, "content": ""} for r in m.results
    ]
    content += [{"type": "text", "text": t} for t in m.texts]
    content += [{"type": "tool_use", "id": c, "name": "tool", "input": {}} for c in m.calls]
    return {"role": m.role, "content": content}


def _gemini(m: Message) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {"functionResponse": {"id": r, "name": "tool", "response": {}}} for r in m.results
    ]
    parts += [{"text": t} for t in m.texts]
    parts += [{"functionCall": {"id": c, "name": "tool", "args": {}}} for c in m.calls]
    return {"role": "model" if m.role == "assistant" else "user", "parts": parts}


def _responses(m: Message) -> Iterator[dict[str, Any]]:
    if m.texts:
        yield {"role": m.role, "content": [{"type": "input_text", "text": t} for t in m.texts]}
    for c in m.calls:
        yield {"type": "function_call", "call_id": c, "name": "tool", "arguments": "{}"}
    for r in m.results:
        yield {"type": "function_call_output", "call_id": r, "output": ""}


def _chat(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.results[0], "content": ""}
    out: dict[str, Any] = {"role": m.role, "content": " ".join(m.texts)}
    if m.calls:
        out["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "tool", "arguments": "{}"}}
            for c in m.calls
        ]
    return out


def preview_for(transcript: Transcript, target: Target | None) -> Preview:
    """Return what pi sends resuming `transcript` with `target` (None: pi's default model).

    The request's provider follows `target.api` (Anthropic when unknown).
    Violations are the strict provider's (`check_request`) on those messages;
    where pi's walk goes round a parent loop, it sends none: no messages and
    one violation saying so, at the record whose link closes the loop.
    """
    target = target or Target("anthropic", "anthropic-messages", "")
    provider = _APIS.get(target.api, "anthropic")
    top = _loop_top(_entries(transcript))
    if top is not None:
        hangs = (
            f"pi's walk up parentId from the last entry goes round a loop at record {top} "
            "and never ends; pi hangs"
        )
        return Preview("pi", provider, [], [Violation(top, "", hangs)], [], [], MODELLED_ON)
    messages, dropped, added = _convert(transcript, target, provider)
    violations = check_request(provider, _request_body(messages, provider)) if messages else []
    return Preview("pi", provider, messages, violations, dropped, added, MODELLED_ON)


@register("openclaw")
def preview(transcript: Transcript) -> Preview:
    """Return what pi sends on resuming `transcript` with the session's own model."""
    return preview_for(transcript, session_target(transcript))
