"""Build sessions in native formats from an abstract script, for property tests.

A script is a list of turns; each turn is a user prompt, then an assistant
message with tool calls, then what happens to each call's result. Faults are
injected by the script, so tests know what a correct detector must find.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import strategies as st

FATES = ("ok", "missing", "duplicate", "displaced", "orphan")


@dataclass
class Turn:
    calls: list[str]
    fates: list[str]
    text: str = "working"
    reply: str = "done"


@dataclass
class Script:
    turns: list[Turn] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(f == "ok" for t in self.turns for f in t.fates)

    def expected(self, fmt: str = "") -> list[tuple[str, str]]:
        """Return (fault kind, tool call id) pairs a correct detector reports.

        In the Anthropic builder, results written after a user's words share its
        message; right after the calls that is `result_not_first`, not displaced.
        """
        kinds = {
            "missing": "missing_result",
            "duplicate": "duplicate_result",
            "displaced": "displaced_result",
        }
        found = []
        for turn in self.turns:
            now, after, _ = _results_plan(turn)
            for call, fate in zip(turn.calls, turn.fates, strict=True):
                if fmt == "codex" and fate == "displaced":
                    continue  # the Responses API takes an output anywhere after its call
                if fmt == "anthropic" and fate == "displaced" and not now:
                    if call == after[0]:
                        found.append(("result_not_first", call))
                elif fate in kinds:
                    found.append((kinds[fate], call))
                elif fate == "orphan":
                    found.append(("orphaned_result", "stray_" + call))
        return sorted(found)


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)


@st.composite
def scripts(draw: st.DrawFn, healthy: bool = False) -> Script:
    n_turns = draw(st.integers(1, 5))
    script = Script()
    counter = 0
    for _ in range(n_turns):
        n_calls = draw(st.integers(0, 3))
        calls = []
        for _ in range(n_calls):
            counter += 1
            calls.append(f"call_{counter:03d}")
        fates = [draw(st.just("ok") if healthy else st.sampled_from(FATES)) for _ in calls]
        script.turns.append(Turn(calls, fates, draw(texts), draw(texts)))
    return script


def _results_plan(turn: Turn) -> tuple[list[str], list[str], list[str]]:
    """Return (ids answered right after the call, ids after an interjection, late ids)."""
    now, after, late = [], [], []
    for call, fate in zip(turn.calls, turn.fates, strict=True):
        if fate == "ok":
            now.append(call)
        elif fate == "duplicate":
            now.append(call)
            late.append(call)
        elif fate == "displaced":
            after.append(call)
        elif fate == "orphan":
            now.append(call)
            now.append("stray_" + call)
    return now, after, late


def openai_chat(script: Script, indent: int | None = None) -> bytes:
    messages: list[dict] = [{"role": "system", "content": "You help."}]
    late: list[str] = []
    for k, turn in enumerate(script.turns):
        messages.append({"role": "user", "content": f"task {k}"})
        for call in late:
            messages.append({"role": "tool", "tool_call_id": call, "content": "again"})
        late = []
        if not turn.calls:
            messages.append({"role": "assistant", "content": turn.reply})
            continue
        messages.append(
            {
                "role": "assistant",
                "content": turn.text or None,
                "tool_calls": [
                    {
                        "id": c,
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"n": k})},
                    }
                    for c in turn.calls
                ],
            }
        )
        now, after, late = _results_plan(turn)
        messages.extend({"role": "tool", "tool_call_id": c, "content": "out " + c} for c in now)
        if after:
            messages.append({"role": "user", "content": "hurry up"})
            messages.extend(
                {"role": "tool", "tool_call_id": c, "content": "out " + c} for c in after
            )
        messages.append({"role": "assistant", "content": turn.reply})
    if late:
        messages.append({"role": "user", "content": "thanks"})
        messages.extend({"role": "tool", "tool_call_id": c, "content": "again"} for c in late)
    return json.dumps(messages, indent=indent, ensure_ascii=False).encode()


def anthropic(script: Script, indent: int | None = 2) -> bytes:
    messages: list[dict] = []
    late: list[str] = []
    for k, turn in enumerate(script.turns):
        prompt: list[dict] = [
            {"type": "tool_result", "tool_use_id": c, "content": "again"} for c in late
        ]
        messages.append(
            {"role": "user", "content": prompt + [{"type": "text", "text": f"task {k}"}]}
        )
        late = []
        if not turn.calls:
            messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": turn.reply}]}
            )
            continue
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": turn.text}]
                + [
                    {"type": "tool_use", "id": c, "name": "run", "input": {"n": k}}
                    for c in turn.calls
                ],
            }
        )
        now, after, late = _results_plan(turn)
        blocks = [{"type": "tool_result", "tool_use_id": c, "content": "out " + c} for c in now]
        if after:
            if blocks:
                messages.append({"role": "user", "content": blocks})
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hurry up"}]
                    + [
                        {"type": "tool_result", "tool_use_id": c, "content": "out " + c}
                        for c in after
                    ],
                }
            )
        elif blocks:
            messages.append({"role": "user", "content": blocks})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.reply}]})
    if late:
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c, "content": "again"} for c in late
                ],
            }
        )
    return json.dumps(messages, indent=indent, ensure_ascii=False).encode()


class _Chain:
    def __init__(self, uid_key: str, parent_key: str, width: int) -> None:
        self.uid_key, self.parent_key, self.width = uid_key, parent_key, width
        self.last: str | None = None
        self.n = 0
        self.lines: list[dict] = []

    def add(self, body: dict) -> dict:
        self.n += 1
        uid = f"{self.n:0{self.width}x}"
        line = {self.parent_key: self.last, **body, self.uid_key: uid}
        self.last = uid
        self.lines.append(line)
        return line


def claude_code(script: Script, eol: str = "\n", final_newline: bool = True) -> bytes:
    chain = _Chain("uuid", "parentUuid", 32)
    ctx = {"isSidechain": False, "sessionId": "s-1", "cwd": "/w"}

    def user(content: object) -> None:
        chain.add({**ctx, "type": "user", "message": {"role": "user", "content": content}})

    def result(call: str, text: str) -> None:
        user([{"tool_use_id": call, "type": "tool_result", "content": text}])

    def assistant(mid: str, block: dict) -> None:
        chain.add(
            {
                **ctx,
                "type": "assistant",
                "message": {"id": mid, "role": "assistant", "content": [block]},
            }
        )

    chain.lines.append({"type": "file-history-snapshot", "messageId": "m"})
    late: list[str] = []
    for k, turn in enumerate(script.turns):
        user(f"task {k}")
        for call in late:
            result(call, "again")
        late = []
        mid = f"msg_{k}"
        assistant(mid, {"type": "text", "text": turn.text})
        for call in turn.calls:
            assistant(mid, {"type": "tool_use", "id": call, "name": "Bash", "input": {"n": k}})
        now, after, late = _results_plan(turn)
        for call in now:
            result(call, "out " + call)
        if after:
            user([{"type": "text", "text": "hurry up"}])
            for call in after:
                result(call, "out " + call)
        assistant(f"msg_{k}_end", {"type": "text", "text": turn.reply})
    for call in late:
        result(call, "again")
    text = eol.join(
        json.dumps(line, separators=(",", ":"), ensure_ascii=False) for line in chain.lines
    )
    return (text + (eol if final_newline else "")).encode()


def openclaw(script: Script) -> bytes:
    chain = _Chain("id", "parentId", 8)
    header = {"type": "session", "version": 3, "id": "sess", "cwd": "/w"}

    def message(body: dict) -> None:
        line = chain.add({"type": "message", "message": body})
        line["type"] = "message"

    late: list[str] = []
    for k, turn in enumerate(script.turns):
        message({"role": "user", "content": [{"type": "text", "text": f"task {k}"}]})
        for call in late:
            message(
                {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": "exec",
                    "content": [{"type": "text", "text": "again"}],
                    "isError": False,
                }
            )
        late = []
        message(
            {
                "role": "assistant",
                "api": "anthropic-messages",
                "content": [{"type": "text", "text": turn.text}]
                + [
                    {"type": "toolCall", "id": c, "name": "exec", "arguments": {"n": k}}
                    for c in turn.calls
                ],
                "stopReason": "toolUse",
            }
        )
        now, after, late = _results_plan(turn)
        for call in now:
            message(
                {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": "exec",
                    "content": [{"type": "text", "text": "out " + call}],
                    "isError": False,
                }
            )
        if after:
            message({"role": "user", "content": [{"type": "text", "text": "hurry up"}]})
            for call in after:
                message(
                    {
                        "role": "toolResult",
                        "toolCallId": call,
                        "toolName": "exec",
                        "content": [{"type": "text", "text": "out"}],
                        "isError": False,
                    }
                )
        message(
            {
                "role": "assistant",
                "api": "anthropic-messages",
                "content": [{"type": "text", "text": turn.reply}],
                "stopReason": "stop",
            }
        )
    for call in late:
        message(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "exec",
                "content": [{"type": "text", "text": "again"}],
                "isError": False,
            }
        )
    lines = [header] + chain.lines
    return (
        "\n".join(json.dumps(x, separators=(",", ":"), ensure_ascii=False) for x in lines) + "\n"
    ).encode()


def codex(script: Script) -> bytes:
    lines: list[dict] = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}
    ]

    def item(payload: dict) -> None:
        lines.append({"timestamp": "t", "type": "response_item", "payload": payload})

    def user(text: str) -> None:
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    def output(call: str, text: str) -> None:
        item({"type": "function_call_output", "call_id": call, "output": text})

    late: list[str] = []
    for k, turn in enumerate(script.turns):
        user(f"task {k}")
        for call in late:
            output(call, "again")
        late = []
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": turn.text}]})
        for call in turn.calls:
            item(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"n": k}),
                    "call_id": call,
                }
            )
        now, after, late = _results_plan(turn)
        for call in now:
            output(call, "out " + call)
        if after:
            user("hurry up")
            for call in after:
                output(call, "out " + call)
        if any(fate == "missing" for fate in turn.fates):
            lines.append(
                {
                    "timestamp": "t",
                    "type": "event_msg",
                    "payload": {"type": "turn_aborted", "reason": "interrupted"},
                }
            )
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.reply}],
            }
        )
    for call in late:
        output(call, "again")
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


def gemini(script: Script) -> bytes:
    contents: list[dict] = []

    def user(parts: list[dict]) -> None:
        contents.append({"role": "user", "parts": parts})

    def response(call: str, text: str) -> dict:
        return {"functionResponse": {"id": call, "name": "run", "response": {"output": text}}}

    late: list[str] = []
    for k, turn in enumerate(script.turns):
        user([{"text": f"task {k}"}])
        if late:
            user([response(c, "again") for c in late])
        late = []
        parts: list[dict] = [{"text": turn.text}] if turn.text else []
        parts += [{"functionCall": {"id": c, "name": "run", "args": {"n": k}}} for c in turn.calls]
        if parts:
            contents.append({"role": "model", "parts": parts})
        now, after, late = _results_plan(turn)
        if now:
            user([response(c, "out " + c) for c in now])
        if after:
            user([{"text": "hurry up"}])
            user([response(c, "out " + c) for c in after])
        contents.append({"role": "model", "parts": [{"text": turn.reply or "done"}]})
    if late:
        user([response(c, "again") for c in late])
    return json.dumps({"contents": contents}, indent=2, ensure_ascii=False).encode()


def openhands(script: Script) -> bytes:
    events: list[dict] = []

    def event(kind: str, **body: object) -> None:
        events.append({"kind": kind, "id": f"ev-{len(events):04d}", **body})

    def message(role: str, text: str) -> None:
        event(
            "MessageEvent",
            source=role,
            llm_message={"role": role, "content": [{"type": "text", "text": text}]},
        )

    def observation(call: str, text: str) -> None:
        event(
            "ObservationEvent",
            source="environment",
            tool_name="run",
            tool_call_id=call,
            observation={"content": [{"type": "text", "text": text}]},
        )

    late: list[str] = []
    for k, turn in enumerate(script.turns):
        message("user", f"task {k}")
        for call in late:
            observation(call, "again")
        late = []
        for call in turn.calls:
            event(
                "ActionEvent",
                source="agent",
                tool_name="run",
                tool_call_id=call,
                llm_response_id=f"resp-{k}",
                tool_call={"id": call, "name": "run", "arguments": json.dumps({"n": k})},
            )
        now, after, late = _results_plan(turn)
        for call in now:
            observation(call, "out " + call)
        if after:
            message("user", "hurry up")
            for call in after:
                observation(call, "out " + call)
        message("assistant", turn.reply or "done")
    for call in late:
        observation(call, "again")
    return json.dumps(events, indent=2).encode()
