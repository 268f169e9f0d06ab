"""Agent output streams: what one non-interactive run printed, not the session it belongs to.

`claude -p --output-format stream-json`, `codex exec --json` and Gemini CLI
`--output-format stream-json` print JSON lines of events, often with stray
stderr lines mixed in. They are common in bug reports, but no agent resumes
them and they lack what a session keeps (the system prompt, earlier turns,
the tree), so a repair of one would resume nothing. Pairfix refuses them,
naming the tool and the file that holds the real session.

Event shapes, from each agent's own writer:
- Claude Code: `{"type": "system", "subtype": "init", "cwd", "session_id", ...}`, then
  `assistant`/`user`/`stream_event` lines and a closing `result`, each with
  `session_id` (camelCase `sessionId` is the session file's spelling);
  `--output-format json` prints that `result` object alone.
- Codex (codex-rs/exec `--json`): `{"type": "thread.started", "thread_id"}`, then
  `turn.*` and `item.*` events; before 0.44 `{"id", "msg": {"type", ...}}` lines.
- Gemini CLI (packages/cli nonInteractiveCli, JsonStreamEventType): `init`
  `{timestamp, session_id, model}`, `message`, `tool_use` `{tool_name, tool_id,
  parameters}`, `tool_result` `{tool_id, status, output}`, `error`, `result`.
"""

from __future__ import annotations

import re
from typing import Any

_GEMINI_EVENTS = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
_CLAUDE_EVENTS = frozenset({"system", "assistant", "user", "result", "stream_event"})


def _kind(obj: Any) -> str | None:
    """Return a line's `type` when it is a string (lines are untrusted: any JSON at all)."""
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def _claude(sample: list[Any]) -> str | None:
    lines = [obj for obj in sample if _kind(obj) in _CLAUDE_EVENTS and "session_id" in obj]
    if not lines:
        return None
    init = next((obj for obj in lines if obj.get("subtype") == "init"), lines[0])
    session, cwd = init.get("session_id"), init.get("cwd")
    if isinstance(session, str) and isinstance(cwd, str):
        where = f"~/.claude/projects/{re.sub(r'[^A-Za-z0-9]', '-', cwd)}/{session}.jsonl"
    elif isinstance(session, str):
        where = f"~/.claude/projects/<cwd, every non-alphanumeric character as ->/{session}.jsonl"
    else:
        where = "~/.claude/projects/<cwd, every non-alphanumeric character as ->/<sessionId>.jsonl"
    # `--output-format json` prints the closing `result` event alone.
    flag = "json" if [obj.get("type") for obj in lines] == ["result"] else "stream-json"
    return (
        f"this is the output stream of `claude -p --output-format {flag}` (Claude Code), "
        f"not a session file; Claude Code keeps the session in {where}: read that file instead"
    )


def _codex(sample: list[Any]) -> str | None:
    events = [obj for obj in sample if isinstance(obj, dict)]
    new = [obj for obj in events if (_kind(obj) or "").split(".")[0] in ("thread", "turn", "item")]
    old = [obj for obj in events if "id" in obj and isinstance(obj.get("msg"), dict)]
    if not new and not old:
        return None
    thread = next(
        (obj["thread_id"] for obj in new if isinstance(obj.get("thread_id"), str)), "<thread id>"
    )
    return (
        "this is the output stream of `codex exec --json` (Codex), not a session file; Codex "
        f"keeps the session in ~/.codex/sessions/YYYY/MM/DD/rollout-<time>-{thread}.jsonl: "
        "read that file instead"
    )


def _gemini(sample: list[Any]) -> str | None:
    events = [obj for obj in sample if _kind(obj) in _GEMINI_EVENTS and "timestamp" in obj]
    marked = [
        obj
        for obj in events
        if (obj["type"] == "init" and "session_id" in obj and "model" in obj)
        or (obj["type"] in ("tool_use", "tool_result") and "tool_id" in obj)
    ]
    if not marked:
        return None
    session = next(
        (obj["session_id"] for obj in events if isinstance(obj.get("session_id"), str)), ""
    )
    short = session[:8] if session else "<first 8 characters of the session id>"
    return (
        "this is the output stream of `gemini --output-format stream-json` (Gemini CLI), not a "
        f"session file; Gemini CLI keeps the session in ~/.gemini/tmp/<project>/chats/"
        f"session-<time>-{short}.jsonl: read that file instead"
    )


def _gemini_json(sample: list[Any]) -> str | None:
    root = sample[0] if len(sample) == 1 else None
    if not (
        isinstance(root, dict)
        and isinstance(root.get("session_id"), str)
        and ("response" in root or "stats" in root)
        and "type" not in root
    ):
        return None
    return (
        "this is the output of `gemini --output-format json` (Gemini CLI), not a session "
        "file; Gemini CLI keeps the session in ~/.gemini/tmp/<project>/chats/"
        f"session-<time>-{root['session_id'][:8]}.jsonl: read that file instead"
    )


def _keys(obj: Any) -> frozenset[str]:
    return frozenset(obj) if isinstance(obj, dict) else frozenset()


# An agent's own JSON-lines files that are no session, by the keys of every line:
# Claude Code's prompt history (`{display, pastedContents, timestamp, project}`, the
# up-arrow's list) and Codex's (codex-rs message_history: `{session_id, ts, text}`).
_AGENT_FILES = (
    (frozenset({"display", "timestamp"}), "Claude Code's prompt history (~/.claude/history.jsonl)"),
    (frozenset({"session_id", "ts", "text"}), "Codex's prompt history (~/.codex/history.jsonl)"),
)


def agent_file(sample: list[Any]) -> str | None:
    """Return what an agent's file that is no session is ("Codex's prompt history ..."), or None.

    `sample` is the file's first parsed JSON lines; every one must have the
    file's keys, and none a `type` (every session line of these agents has one).
    """
    if not sample:
        return None
    for keys, what in _AGENT_FILES:
        if all(keys <= _keys(obj) and "type" not in obj for obj in sample):
            return what
    return None


def stream_refusal(sample: list[Any]) -> str | None:
    """Return why `sample` (a file's first parsed JSON lines) is refused, or None.

    None when the lines are no agent output stream Pairfix knows; else a
    sentence naming the agent and where its session file is.
    """
    for check in (_claude, _codex, _gemini, _gemini_json):
        reason = check(sample)
        if reason is not None:
            return reason
    return None
