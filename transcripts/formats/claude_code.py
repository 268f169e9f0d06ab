"""Claude Code session JSONL (`~/.claude/projects/<cwd>/<sessionId>.jsonl`), formats.md §4.

One line per content block of an API message (lines share `message.id`),
linked by `uuid`/`parentUuid`; a `compact_boundary` system line restarts the
chain. A synthetic result is a `user` line holding one `tool_result`, linked
after the call's line, with the child re-pointed to it.

Lines without the chain (older versions, and files other tools write or trim:
no `uuid`, or no `parentUuid` linking one line to another) are read in file
order, and a repair adds no link to them. In a file where some lines link and
some do not, the chain is followed as Claude Code's loader follows it: it keys
lines by `uuid` and walks `parentUuid` back from the leaf, so a line that no
chain reaches is kept in the file but is not part of the conversation. A line
parented on its own `uuid`, or on a `uuid` no line holds, is read under the
line before it, as that walk reads it (`_mend_links`).
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

from transcripts.core.model import _OTHER_SHIFT, _SIDECHAIN, Op, Record, Role, Transcript
from transcripts.core.store import RecordStore
from transcripts.formats._blocks import (
    find_result_block,
    picked,
    read_blocks,
    result_block,
    stored_blocks,
)
from transcripts.formats._json import ordered_like
from transcripts.formats.base import CERTAIN, LOOSE, Format, Placed, digest, linked, preview

_NAMESPACE = uuid.UUID("5b0f3a36-8f6e-4d3e-9a57-0d3a1f9b2c11")
_NOT_CONTEXT = ("message", "requestId", "uuid", "parentUuid", "type", "timestamp", "toolUseResult")


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


# Claude Code 2.1.328's chain walk (`ton` in its bundle): where a line's parent is missing
# or already walked, the parent is the latest line before it in time, of the same side
# (main chain or sidechain), at most this many milliseconds older.
_FALLBACK_MS = 5000
# How many lines before a line whose parent is mended are looked at for that parent (a
# bound on a hostile file of many such lines, not a rule of Claude Code's).
_FALLBACK_LINES = 64


def _millis(record: Record) -> float | None:
    """Return the record's `timestamp` in milliseconds since the epoch, or None."""
    stamp = record.timestamp
    if stamp is None:
        obj = record.obj
        stamp = obj.get("timestamp") if isinstance(obj, dict) else None
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() * 1000


def _mend_links(records: list[Record]) -> None:
    """Read each line whose `parentUuid` is its lost `uuid`, or no line's, under the line before it.

    Claude Code's walk back from the leaf meets such a line's parent as a line
    it has walked already, or finds no line with that `uuid`, and then takes
    the latest line before it in time, of the same side, no more than 5 s
    older, as its parent (2.1.328, `lwn` and `ton` in its bundle: `if(!z||
    h.has(z.uuid))`, "tengu_chain_timestamp_fallback"); with none, the walk
    ends there. A null `parentUuid` is a root: no line is looked for. That
    line is the nearest earlier line in the file with a `uuid`, a
    `timestamp` no later than this one's and the same `isSidechain` (file
    snapshots are passed over, as the walk passes them). The link is mended in
    `parent`, with the written one in `relinked_from`: a repair that re-links
    the line writes the mended parent, one that does not leaves its bytes as
    they are, and Claude Code reads them the same way. Not a fault. Only in a
    file where some line's parent is another line: one without such a link
    is read in file order (the order that walk takes too), and a repair
    writes no links into it.
    """
    if not linked(records):
        return
    if isinstance(records, RecordStore):
        stored = records
        lost = [
            index
            for index, parent in stored.parents_apart()
            if stored[index].uid == parent or stored.first_with_uid(parent) is None
        ]
    else:
        held = {r.uid for r in records if r.uid is not None}
        lost = [
            r.index
            for r in records
            if r.parent is not None and (r.parent == r.uid or r.parent not in held)
        ]
    for index in lost:
        record = records[index]
        at = _millis(record)
        if at is None:
            continue
        for j in range(index - 1, max(-1, index - 1 - _FALLBACK_LINES), -1):
            before = records[j]
            if (
                before.uid is None
                or before.uid == record.uid
                or before.sidechain != record.sidechain
            ):
                continue
            if before.kind == "system/file_snapshot":
                continue
            then = _millis(before)
            if then is None or then > at:
                continue
            if at - then <= _FALLBACK_MS:
                record.relinked_from, record.parent = record.parent, before.uid
            break


def _api_error(obj: dict[str, Any], message: Any) -> bool:
    return (
        obj.get("isApiErrorMessage") is True
        and isinstance(message, dict)
        and message.get("model") == "<synthetic>"
    )


class ClaudeCode(Format):
    id = "claude_code"
    label = "Claude Code JSONL"
    priority = 140
    tree = True
    uid_key = "uuid"
    parent_key = "parentUuid"
    lost_parent_falls_back = True  # `_mend_links`
    provider = "anthropic"
    agent = True
    result_role = Role.USER  # a result is a `user` line
    malformed_note = (
        "Claude Code skips a line it cannot parse when it loads the session; the lines "
        "parented on it then start a chain of their own."
    )

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return CERTAIN for a `user` or `assistant` line with `sessionId`, a chain or message."""
        sure = any(
            isinstance(obj, dict)
            and obj.get("type") in ("user", "assistant")
            and "sessionId" in obj
            and ({"uuid", "parentUuid"} <= obj.keys() or isinstance(obj.get("message"), dict))
            for obj in sample
        )
        return CERTAIN if sure else 0.0

    def sniff_loose(self, sample: list[Any], filename: str) -> float:
        """Return LOOSE for `{"type": "user"|"assistant", "message": {"role", ...}}` lines.

        Such lines with neither `sessionId` nor a chain are what trimming tools
        leave of a session; `claude -p --output-format stream-json` lines carry
        `session_id` instead, and are not sessions (see `streams`).
        """
        messages = [
            obj
            for obj in sample
            if isinstance(obj, dict) and obj.get("type") in ("user", "assistant")
        ]
        could = bool(messages) and all(
            isinstance(obj.get("message"), dict)
            and "role" in obj["message"]
            and "session_id" not in obj
            for obj in messages
        )
        return LOOSE if could else 0.0

    def classify(self, obj: Any, record: Record) -> None:
        kind = obj.get("type")
        record.kind = str(kind)
        if isinstance(obj.get("uuid"), str):
            record.uid = obj["uuid"]
        parent = obj.get("parentUuid")
        record.parent = parent if isinstance(parent, str) else None
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        record.sidechain = obj.get("isSidechain") is True
        message = obj.get("message")
        if kind == "assistant" and _api_error(obj, message):
            # Claude Code's note of a failed request: shown, never sent to the model.
            record.role = Role.META
            record.kind = "assistant/api_error"
            record.text = preview(message.get("content"))
            return
        if kind in ("user", "assistant") and isinstance(message, dict):
            record.role = Role.USER if kind == "user" else Role.ASSISTANT
            if kind == "assistant" and isinstance(message.get("id"), str):
                record.message_id = message["id"]
            read_blocks(message.get("content"), record)
            return
        record.role = Role.META
        if kind == "system":
            record.boundary = obj.get("subtype") == "compact_boundary"
            record.kind = f"system/{obj.get('subtype')}"
            record.text = preview(obj.get("content"))
        elif kind == "summary":
            record.text = preview(obj.get("summary"))

    stores_lines = True

    def store_line(
        self, obj: dict[str, Any], store: RecordStore, start: int, end: int, line: int
    ) -> bool:
        """Store a `user` or `assistant` line as `classify` reads it (see `Format.store_line`)."""
        kind = obj.get("type")
        if kind == "assistant":
            role = Role.ASSISTANT
        elif kind == "user":
            role = Role.USER
        else:
            return False
        message = obj.get("message")
        if not isinstance(message, dict):
            return False
        message_id = None
        if role is Role.ASSISTANT:
            if _api_error(obj, message):
                return False  # a META record: it keeps its preview
            message_id = message.get("id")
        calls, results, other = stored_blocks(message.get("content"))
        uid, parent = obj.get("uuid"), obj.get("parentUuid")
        store.append_message(
            start,
            end,
            line,
            "assistant" if role is Role.ASSISTANT else "user",
            role,
            (other << _OTHER_SHIFT) | (_SIDECHAIN if obj.get("isSidechain") is True else 0),
            uid if isinstance(uid, str) else None,
            parent if isinstance(parent, str) else None,
            message_id if isinstance(message_id, str) else None,
            calls,
            results,
        )
        return True

    def finish(self, records: list[Record]) -> None:
        """Mend lost parent links; keep a chainless file's sidechains out of its conversation.

        A line whose `parentUuid` is its own `uuid`, or a `uuid` no line
        holds, is read under the line Claude Code's walk takes for its
        parent (`_mend_links`).
        """
        _mend_links(records)
        if not linked(records):
            for record in records:
                if record.sidechain:
                    record.inactive = True

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        call_line = transcript.records[op.call.record].obj
        block = result_block(find_result_block(transcript.records), op.call.id, op.text)
        values = {k: v for k, v in call_line.items() if k not in _NOT_CONTEXT}
        values.update(
            parentUuid=None,
            type="user",
            message={"role": "user", "content": [block]},
            uuid=self.new_uid(transcript, op),
            timestamp=call_line.get("timestamp"),
            toolUseResult="Error: " + op.text,
        )
        if not transcript.tree:
            del values["parentUuid"], values["uuid"]
        # Key order: an existing tool-result line's, else the call line's.
        sibling = next((r.obj for r in transcript.records if r.results and r.kind == "user"), None)
        return ordered_like(sibling or call_line, values)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        assert op.record is not None and op.block is not None
        source = copy.deepcopy(transcript.records[op.record].obj)
        content = source["message"]["content"]
        source["message"]["content"] = [content[op.block]]
        if transcript.tree:
            source["uuid"] = self.new_uid(transcript, op)
        source.pop("toolUseResult", None)
        return source

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        out = copy.copy(obj)
        content = picked(obj["message"]["content"], order)
        out["message"] = dict(obj["message"], content=content)
        if isinstance(content, list) and not placed and not any(map(_is_result, content)):
            out.pop("toolUseResult", None)  # it reports results the line no longer holds
        return out

    def split(self, transcript: Transcript, op: Op) -> Any:
        obj = super().split(transcript, op)
        obj.pop("toolUseResult", None)  # it reports the results, which stay behind
        return obj

    def new_uid(self, transcript: Transcript, op: Op) -> str:
        assert op.call is not None
        call = op.call
        # A split is named by the record it comes out of, too: one turn may split twice.
        split = (op.record,) if op.blocks else ()
        seed = digest(transcript.records[call.record].uid, call.id, call.block, op.kind, *split)
        return str(uuid.uuid5(_NAMESPACE, seed))
