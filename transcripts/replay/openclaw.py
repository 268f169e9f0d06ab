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

from transcripts.core.jsontext import loads
from transcripts.core.model import Transcript
from transcripts.core.validate import Violation
from transcripts.formats.openclaw import PROVIDER_APIS, pi_anthropic_id
from transcripts.formats.source import FileSource
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


@dataclass(frozen=True, slots=True)
class _Line:
    """What pi's walk reads of one entry: its record, `id`, `parentId` and `type`, as written.

    `target` is the model the entry names (a `model_change`, an assistant
    message), or None. The entry itself is read again only if pi sends it.
    """

    record: int
    id: Any
    parent: Any
    type: Any
    target: Target | None


def _values(transcript: Transcript, wanted: list[int] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (record index, `Record.obj`) of every record, or of those `wanted`, in file order.

    `wanted` holds record indexes in increasing order. A stored session's
    records are read from its file in runs of CHUNK bytes
    (`FileSource.spans`), not a read each, and one at a time: the values of
    a long session are never all held at once.
    """
    records = transcript.records
    chosen = records if wanted is None else [records[i] for i in wanted]
    source = records[0].source if records else None
    if not isinstance(source, FileSource):
        yield from ((r.index, r.obj) for r in chosen)
        return
    # What `Record.obj` reads from the file: a record neither parsed nor unreadable.
    data = source.spans((r.start, r.end) for r in chosen if r.parsed is None and r.error is None)
    for r in chosen:
        if r.parsed is None and r.error is None:
            yield r.index, loads(next(data))
        else:
            yield r.index, r.parsed


def _lines(transcript: Transcript) -> list[_Line]:
    """Return what pi's walk reads of every line it parses (its header included)."""
    targets: dict[Target, Target] = {}  # one copy of each model: a session names few
    lines = []
    for index, entry in _values(transcript):
        if not isinstance(entry, dict):
            continue
        target = _named_target(entry)
        if target is not None:
            target = targets.setdefault(target, target)
        parent, kind = entry.get("parentId"), entry.get("type")
        lines.append(_Line(index, entry.get("id"), parent, kind, target))
    return lines


def _named_target(entry: dict[str, Any]) -> Target | None:
    """Return the model an entry names: a `model_change`'s, an assistant message's; else None."""
    if entry.get("type") == "model_change":
        provider = str(entry.get("provider"))
        return Target(provider, PROVIDER_APIS.get(provider, ""), str(entry.get("modelId")))
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        message = entry["message"]
        if message.get("role") == "assistant":
            provider = str(message.get("provider"))
            api = PROVIDER_APIS.get(provider, str(message.get("api")))
            return Target(provider, api, str(message.get("model")))
    return None


def _path(lines: list[_Line]) -> list[_Line]:
    """Return the entries from the root to the last entry, along `parentId` (pi's leaf walk)."""
    if len(lines) < 2 or lines[0].type != "session":
        return []
    body = lines[1:]
    by_id = {line.id: line for line in body}
    path: list[_Line] = []
    seen: set[int] = set()
    current: _Line | None = body[-1]
    while current is not None and current.record not in seen:
        seen.add(current.record)
        path.append(current)
        parent = current.parent
        current = by_id.get(parent) if parent else None
    path.reverse()
    return path


def _loop_top(lines: list[_Line], path: list[_Line]) -> int | None:
    """Return the record whose `parentId` sends pi's leaf walk back round a loop, or None.

    pi's walk (`buildSessionContext`, `while (current)`) has no guard: on
    such a link it never ends, and pi never sends a request. That record is
    the first of `path` (`_path(lines)`), its parent an entry the walk passed already.
    """
    if not path:
        return None
    top = path[0]
    parent = top.parent
    held = {line.id: line.record for line in lines[1:]}
    return top.record if parent and held.get(parent) in {line.record for line in path} else None


def session_target(transcript: Transcript) -> Target | None:
    """Return the model pi restores for the session (the last one on its path), or None."""
    return _target(_path(_lines(transcript)))


def _target(path: list[_Line]) -> Target | None:
    """Return `session_target` of the session whose path (`_path`) is `path`."""
    target = None
    for line in path:
        if line.target is not None:
            target = line.target
    return target


def _messages(transcript: Transcript, path: list[_Line]) -> list[_Msg]:
    """Return the messages of `path` (`_path`) as `buildSessionContext` and `convertToLlm` do.

    Only the entries pi sends are read again: those after the last
    compaction on the path, and the ones it keeps from before it.
    """
    compaction = None
    for k, line in enumerate(path):
        if line.type == "compaction":
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
        for index, entry in _read(transcript, path):
            append(index, entry)
        return out
    index, entry = _read(transcript, path[compaction : compaction + 1])[0]
    summary = _COMPACTION[0] + str(entry.get("summary", "")) + _COMPACTION[1]
    out.append(_Msg("user", index, {"content": [{"type": "text", "text": summary}]}))
    keep = entry.get("firstKeptEntryId")
    kept = next((k for k, line in enumerate(path[:compaction]) if line.id == keep), compaction)
    for index, entry in _read(transcript, path[kept:compaction] + path[compaction + 1 :]):
        append(index, entry)
    return out


def _read(transcript: Transcript, lines: list[_Line]) -> list[tuple[int, dict[str, Any]]]:
    """Return (record index, entry) of each of `lines`, in their order, read from the file."""
    entries: dict[int, dict[str, Any]] = dict(
        _values(transcript, sorted({line.record for line in lines}))
    )
    return [(line.record, entries[line.record]) for line in lines]


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
    transcript: Transcript, path: list[_Line], target: Target, provider: str
) -> tuple[list[Message], list[Dropped], list[Message]]:
    """Return (request messages, what pi drops, what it adds) for `target` on `provider`.

    `path` is the session's path (`_path`).
    """
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

    for msg in _messages(transcript, path):
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
    lines = _lines(transcript)
    return _preview(transcript, lines, _path(lines), target)


def _preview(
    transcript: Transcript, lines: list[_Line], path: list[_Line], target: Target | None
) -> Preview:
    """Return `preview_for` of `transcript`, whose lines are `lines` and path `path`."""
    target = target or Target("anthropic", "anthropic-messages", "")
    provider = _APIS.get(target.api, "anthropic")
    top = _loop_top(lines, path)
    if top is not None:
        hangs = (
            f"pi's walk up parentId from the last entry goes round a loop at record {top} "
            "and never ends; pi hangs"
        )
        return Preview("pi", provider, [], [Violation(top, "", hangs)], [], [], MODELLED_ON)
    messages, dropped, added = _convert(transcript, path, target, provider)
    violations = check_request(provider, _request_body(messages, provider)) if messages else []
    return Preview("pi", provider, messages, violations, dropped, added, MODELLED_ON)


@register("openclaw")
def preview(transcript: Transcript) -> Preview:
    """Return what pi sends on resuming `transcript` with the session's own model."""
    # Each line is parsed once, its path walked once, for the model and the request both;
    # only the entries pi sends are read again.
    lines = _lines(transcript)
    path = _path(lines)
    return _preview(transcript, lines, path, _target(path))
