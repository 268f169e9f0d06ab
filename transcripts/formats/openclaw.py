"""pi coding agent / OpenClaw session JSONL, versions 1 to 3, formats.md §7.

A header line, then entries linked by `id`/`parentId` into a tree; the live
conversation is the path from the last entry to the root, and a `compaction`
entry keeps only what follows its `firstKeptEntryId`. Results are separate
`toolResult` messages.

Two things the agents keep are kept here too. pi's converters replay a
`toolCall` from its `arguments` (`input: block.arguments ?? {}` for
Anthropic), never from the streaming scratch `partialJson` a crash may leave
beside them, so a call with a whole arguments object is not malformed, and
one that a result answers is kept whatever its arguments: the tool ran, and
pi sends both. Only a call with unusable arguments and no result is malformed.
A `toolResult` entry whose `parentId` names its call's tool call id instead
of the call's entry is re-linked to that entry, as OpenClaw's session import
re-links it (observed resuming such files, issue 12). pi alone stops its
branch there (session-manager.js `buildSessionContext` walks `parentId` from the leaf
and finds no entry of that id), so the record keeps the id it was written with
in `relinked_from`: detect reports it as a displaced result and the repair
writes the call's entry id into that `parentId`. A `toolResult` at which
pi's walk stops because its `parentId` names no entry or is null is read
under the entry written before it when its call is on that branch
(`_relink_lost_results`): the repair then moves it under its call rather
than dropping it as an orphan.
"""

from __future__ import annotations

import copy
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import orjson

from transcripts.core.branch import uid_lookup
from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.model import (
    _ABORTED,
    _INTERRUPTED,
    _OTHER_SHIFT,
    Op,
    Record,
    Role,
    ToolResult,
    Transcript,
)
from transcripts.core.policy import INTERRUPTED_TEXT
from transcripts.core.store import RecordStore
from transcripts.core.validate import valid_id
from transcripts.formats._json import ordered_like
from transcripts.formats.base import (
    CERTAIN,
    CallRow,
    Format,
    Placed,
    ResultRow,
    add_call,
    call_row,
    digest,
    linked,
    preview,
    previews_kept,
    result_row,
)

_CALL_TYPES = ("toolCall", "toolUse", "functionCall")
_REFUSED_ID = re.compile(r"[^a-zA-Z0-9_-]")
# A model id JSON can spell otherwise only with a `\u` (or `\/`) escape.
_PLAIN_MODEL = re.compile(r"[A-Za-z0-9._:@+/-]+")


def pi_anthropic_id(call_id: str) -> str:
    """Return `call_id` as pi-ai sends it to Anthropic or Bedrock when another model wrote it.

    Every character outside `[a-zA-Z0-9_-]` becomes `_`, and the id is cut to
    64 characters (`normalizeToolCallId` of pi-ai 0.73.1 providers/anthropic.js
    and providers/amazon-bedrock.js).
    """
    # An OpenAI Responses id (`call_…|fc_…`) is refused for its `|` alone: replaced by
    # str.replace, then the regular expression only for an id that still has another.
    fixed = call_id.replace("|", "_")
    return (fixed if valid_id(fixed) else _REFUSED_ID.sub("_", fixed))[:64]


def _plain_line(record: Record) -> bytes | None:
    """Return the bytes of `record`'s line, or None when its JSON is not read from them."""
    if record.parsed is None and record.source is not None and not record.error:
        return record.source[record.start : record.end]  # type: ignore[no-any-return]
    return None


def _texts_only(content: Any) -> bool:
    """Return True when `content` is a list of blocks each with a `text` string.

    Its preview is those texts: nothing in reading it can fail.
    """
    return isinstance(content, list) and all(
        isinstance(block, dict) and isinstance(block.get("text"), str) for block in content
    )


_ARGS = "argument"  # in every problem `call_problem` finds with a call's arguments
_CONTEXT_ENTRIES = ("custom_message", "branch_summary")
_PROVIDERS = {
    "anthropic-messages": "anthropic",
    "openai-completions": "openai_chat",
    "openai-responses": "openai_responses",
    "openai-codex-responses": "openai_responses",
    "google-generative-ai": "gemini",
    "google-gemini-cli": "gemini",
    "google-vertex": "gemini",
    "bedrock-converse-stream": "bedrock",
}

# pi's built-in providers -> the `api` of their models in its registry (pi-ai
# models.generated.js): a session's model is looked up by provider and id, so for these
# the registry's api wins over the one an assistant message recorded.
PROVIDER_APIS = {
    "anthropic": "anthropic-messages",
    "openai": "openai-responses",
    "google": "google-generative-ai",
}


def _relink_lost_results(records: list[Record], lost: dict[int, str]) -> None:
    """Read a result that ends pi's branch on a lost link as written under the entry before it.

    `lost` maps the index of each record whose `parentId` names no entry of
    the file to that parentId. pi walks `parentId` from the file's last entry
    and stops at an entry whose parent it does not hold, or whose parent is
    null (session-manager.js `getBranch`); a `toolResult` there opens the
    request alone, an orphan the provider refuses, and what was written
    before it is not sent. When that entry is a `toolResult` whose call is
    held by an entry at or above the entry written just before it (pi
    appends an entry under the leaf of the moment), and no other result
    answers that call, its `parent` becomes that earlier entry and
    `relinked_from` keeps the parentId as written ("" for null). The branch
    then runs through the call, the result is reported as displaced and the
    repair moves it under its call, keeping its output. The walk goes on
    from there, so several such results in a row are all read back.
    A result on no branch pi resumes, or whose call is answered elsewhere,
    is left as it is (an orphan, dropped by the repair).
    """
    roots: Iterable[int]
    if isinstance(records, RecordStore):
        roots = records.roots()
    else:
        roots = (r.index for r in records if r.parent is None and r.uid is not None)
    lost.update((i, "") for i in roots if records[i].role is Role.TOOL)
    # Only a lost `toolResult` is read back: else no walk (a file whose head was cut off).
    lost = {i: parent for i, parent in lost.items() if records[i].kind == "toolResult"}
    if not lost:
        return
    by_uid = uid_lookup(records, True)

    def parent_of(index: int) -> int | None:
        if isinstance(records, RecordStore):
            return records.parent_of(index)
        parent = records[index].parent
        return None if parent is None else by_uid(parent)

    def written_before(index: int) -> int | None:
        # An entry pi holds: a line whose id a later line holds too is that later one's.
        for j in range(index - 1, -1, -1):
            uid = records[j].uid
            if uid is not None and records[j].error is None and by_uid(uid) == j:
                return j
        return None

    def next_up(index: int) -> int | None:
        # The walk's step up from `index`, reading a lost result under the entry before it.
        above = parent_of(index)
        return written_before(index) if above is None and index in lost else above

    # The walk up from the first entry `holds_call` is asked of, made once: each later
    # entry asked of is on it (the entry before a lost result read back, or the top its
    # parents lead to), so a call is held above an entry when the walk holds it at or past
    # that entry's step. Walked again for each result, a run of lost results cost n².
    steps: dict[int, int] = {}  # entry index -> its step on the walk
    held: dict[str, int] = {}  # call id -> the last step whose assistant entry holds it

    def walk_from(index: int | None) -> None:
        steps.clear()
        held.clear()
        while index is not None and index not in steps:
            steps[index] = len(steps)
            record = records[index]
            if record.role is Role.ASSISTANT:
                for call in record.calls:
                    held[call.id] = steps[index]
            index = next_up(index)

    def holds_call(index: int, call_id: str) -> bool:
        if index not in steps:
            walk_from(index)
        return held.get(call_id, -1) >= steps[index]

    answers = _answer_counts(records)
    leaf = next((r.index for r in reversed(records) if r.uid is not None and r.error is None), None)
    seen = bytearray(len(records))
    at = leaf
    while at is not None:
        # pi's walk from the leaf up to the entry it stops at.
        while not seen[at]:
            seen[at] = 1
            above = parent_of(at)
            if above is None:
                break
            at = above
        record = records[at]
        if at not in lost or len(record.results) != 1:
            return
        call_id = record.results[0].tool_call_id
        before = written_before(at)
        if before is None or not holds_call(before, call_id):
            return
        if answers[call_id] != 1:
            return  # answered elsewhere too: a duplicate, left to the repair
        record.relinked_from, record.parent = lost.pop(at), records[before].uid
        at = before


def _answer_counts(records: list[Record]) -> Counter[str]:
    """Return, for each tool call id, how many entries hold a result of it (one pass).

    Lines with one id are one entry, as pi reads them (a line logged twice).
    """
    rows: Iterable[tuple[int, str]]
    if isinstance(records, RecordStore):
        rows = records.result_rows()
    else:
        rows = ((r.index, result.tool_call_id) for r in records for result in r.results)
    entries = {(records[i].uid or i, result_id) for i, result_id in rows}
    return Counter(result_id for _, result_id in entries)


class OpenClaw(Format):
    id = "openclaw"
    label = "OpenClaw / pi session JSONL"
    priority = 160
    tree = True
    uid_key = "id"
    parent_key = "parentId"
    keep_key = "firstKeptEntryId"
    last_copy = True
    provider = "anthropic"
    native_text = "[openclaw] " + OPENCLAW_SENTENCE
    agent = True
    malformed_note = (
        "pi and OpenClaw skip a line that is not JSON when they load the session "
        '(session-manager: "Skip malformed lines"); entries parented on it lose their branch.'
    )

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return CERTAIN when the first line is pi's `session` header."""
        first = sample[0] if sample else None
        sure = (
            isinstance(first, dict)
            and first.get("type") == "session"
            and ("version" in first or "cwd" in first)
        )
        return CERTAIN if sure else 0.0

    def reads_tree(self, records: list[Record]) -> bool:
        """Return True when an entry has an `id`: pi reads the file as a tree then.

        pi walks from the file's last entry up its `parentId` links, whether or
        not any link names an entry of the file (session-manager.js
        `buildSessionContext`): an entry whose parent is missing ends the walk.
        Only a v1 session, whose entries have no ids, is read in file order (pi
        links each to the one before, `migrateV1ToV2`).
        """
        # A linked store answers without a walk; else the first entry with an id ends it.
        return linked(records) or any(record.uid is not None for record in records)

    def classify(self, obj: Any, record: Record) -> None:
        kind = obj.get("type")
        record.kind = str(kind)
        if isinstance(obj.get("id"), str) and kind != "session":
            record.uid = obj["id"]
        parent = obj.get("parentId")
        record.parent = parent if isinstance(parent, str) else None
        record.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        message = obj.get("message")
        if kind == "message" and isinstance(message, dict):
            self._message(message, record)
        elif kind == "compaction":
            record.role = Role.META
            keep = obj.get("firstKeptEntryId")
            record.keep_from = keep if isinstance(keep, str) else ""
            record.text = preview(obj.get("summary"))
        elif kind in _CONTEXT_ENTRIES:
            record.role = Role.USER
            record.other_blocks = 1
            record.text = preview(obj.get("content") or obj.get("summary"))
        else:
            record.role = Role.META

    def _message(self, message: dict[str, Any], record: Record) -> None:
        role = message.get("role")
        record.kind = str(role)
        content = message.get("content")
        if role == "assistant":
            record.role = Role.ASSISTANT
            stop = message.get("stopReason")
            error = message.get("errorMessage")
            record.aborted = stop in ("error", "aborted")
            record.interrupted = stop in ("error", "aborted", "length") or bool(
                isinstance(error, str) and error.strip()
            )
            # Without previews, only what could fail to read is read (base.without_previews).
            show = previews_kept(record)
            texts = []
            for j, block in enumerate(content if isinstance(content, list) else []):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in _CALL_TYPES and isinstance(block, dict):
                    args = block.get("arguments", block.get("input"))
                    # pi keeps its streaming buffer on calls that completed: with their
                    # arguments parsed, a leftover `partialJson` is no cut-off (issue 12).
                    partial = "partialJson" in block and not isinstance(args, dict)
                    call = add_call(
                        record, j, block.get("id"), block.get("name"), args, partial=partial
                    )
                    if show:
                        texts.append(f"{call.name}({preview(call.args, 200)})")
                else:
                    record.other_blocks += 1
                    if kind == "text" and isinstance(block, dict):
                        value = block.get("text", "")
                        if show or not isinstance(value, str):
                            texts.append(str(value))
                    else:
                        texts.append(f"({kind})")
            if isinstance(content, str):
                record.other_blocks += 1
                texts.append(content)
            record.text = preview(" ".join(texts)) if show else ""
        elif role == "toolResult":
            record.role = Role.TOOL
            result_id = message.get("toolCallId", message.get("toolUseId"))
            text = preview(content)
            record.results.append(
                ToolResult(
                    str(result_id or ""), record.index, 0, message.get("isError") is True, text
                )
            )
            record.text = text
        else:
            record.role = Role.USER
            record.other_blocks = 1
            show = previews_kept(record) or not isinstance(content, str)
            record.text = preview(content) if show else ""

    stores_lines = True

    def store_line(
        self, obj: dict[str, Any], store: RecordStore, start: int, end: int, line: int
    ) -> bool:
        """Store a `message` entry as `classify` reads it (see `Format.store_line`)."""
        message = obj.get("message")
        if obj.get("type") != "message" or not isinstance(message, dict):
            return False
        uid, parent = obj.get("id"), obj.get("parentId")
        role = message.get("role")
        content = message.get("content")
        calls: list[CallRow] | None = None
        results: tuple[ResultRow, ...] = ()
        if role == "assistant":
            kind, stored_role, other = "assistant", Role.ASSISTANT, 0
            stop, error = message.get("stopReason"), message.get("errorMessage")
            bits = _ABORTED if stop in ("error", "aborted") else 0
            if stop in ("error", "aborted", "length") or (isinstance(error, str) and error.strip()):
                bits |= _INTERRUPTED
            for j, block in enumerate(content if isinstance(content, list) else ()):
                block_kind = block.get("type") if isinstance(block, dict) else None
                if block_kind == "text":
                    other += 1
                    if not isinstance(block.get("text", ""), str):
                        raise TypeError("a text block whose text is not a string")
                elif block_kind in _CALL_TYPES:
                    args = block.get("arguments", block.get("input"))
                    partial = "partialJson" in block and not isinstance(args, dict)
                    if calls is None:
                        calls = []
                    calls.append(call_row(j, block.get("id"), block.get("name"), args, partial))
                else:
                    other += 1
                    if block_kind is not None and not isinstance(block_kind, str):
                        raise TypeError("a block type that is not a string")
            if isinstance(content, str):
                other += 1
        elif role == "toolResult":
            kind, stored_role, other, bits = "toolResult", Role.TOOL, 0, 0
            result_id = message.get("toolCallId", message.get("toolUseId"))
            is_error = message.get("isError") is True
            results = (result_row(0, result_id, is_error, content),)
        elif isinstance(role, str):
            kind, stored_role, other, bits = role, Role.USER, 1, 0
            if not (isinstance(content, str) or _texts_only(content)):
                preview(content)  # read as `classify` reads it, for what reading it raises
        else:
            return False
        store.append_message(
            start,
            end,
            line,
            kind,
            stored_role,
            (other << _OTHER_SHIFT) | bits,
            uid if isinstance(uid, str) else None,
            parent if isinstance(parent, str) else None,
            None,
            calls or (),
            results,
        )
        return True

    def finish(self, records: list[Record]) -> None:
        """Re-link results parented on a call id or lost off their branch; keep odd answered calls.

        A result parented on a tool call id goes under that call's entry. A
        result whose parent names no entry, or is null, that ends pi's walk
        from the leaf goes under the entry written before it
        (`_relink_lost_results`). A call with odd arguments that a result
        answers is kept.
        """
        by_uid = uid_lookup(records)
        # The parents no entry holds, which a call's id may be: few, so only their calls'
        # entries are looked for (not a map of every call of a long session). A parent
        # that is the entry before's id is held: a stored session skips those unread.
        apart = (
            list(records.parents_apart())
            if isinstance(records, RecordStore)
            else [(r.index, r.parent) for r in records if r.parent is not None]
        )
        unknown = {parent for _, parent in apart if by_uid(parent) is None}
        entry_of: dict[str, str] = {}
        for record in records if unknown else ():
            if record.role is Role.ASSISTANT and record.uid is not None:
                for call in record.calls:
                    if call.id in unknown:
                        entry_of.setdefault(call.id, record.uid)
        relinked: set[int] = set()
        for index, parent in apart:
            entry = entry_of.get(parent) if parent in unknown else None
            # Only a result: OpenClaw's import re-links results, and pi's walk stops at any
            # entry so parented. Another entry read under the call could close a parent loop
            # that pi never walks, and a repair would write it.
            if entry is not None and records[index].kind == "toolResult":
                record = records[index]
                record.relinked_from, record.parent = parent, entry
                relinked.add(index)
        # A parent that names no entry, or the entry itself (pi's walk would never leave it).
        lost = {
            i: parent
            for i, parent in apart
            if (parent in unknown and i not in relinked) or parent == records[i].uid
        }
        _relink_lost_results(records, lost)
        if isinstance(records, RecordStore):
            odd = [records[i] for i in records.with_call_problems()]
            # Only the ids of calls with a problem are looked up: no set of every result.
            asked = {c.id for record in odd for c in record.calls if c.problem}
            answered = {i for i in records.result_ids() if i in asked} if asked else set()
        else:
            answered = {r.tool_call_id for record in records for r in record.results}
            odd = [record for record in records if any(c.problem for c in record.calls)]
        for record in odd:
            if any(c.problem and c.id in answered and _ARGS in c.problem for c in record.calls):
                record.calls = [
                    replace(c, problem="") if c.id in answered and _ARGS in c.problem else c
                    for c in record.calls
                ]

    def provider_of(self, records: list[Record]) -> str:
        """Return the provider of the model pi resumes the session with.

        That is the model of the last `model_change` entry or assistant
        message on the path from the last entry to the root (pi's
        `buildSessionContext`; `replay.openclaw.session_target` reads the
        same). pi looks a model up by its provider and id, so for a built-in
        provider the registry's `api` wins over the one recorded
        (`PROVIDER_APIS`). An `api` Pairfix does not know, or no model at
        all, gives the format's default (Anthropic), as the preview does.
        """
        model = self._resumed_model(records)
        return self.provider if model is None else self._api_provider(model[1])

    def _resumed_model(self, records: list[Record]) -> tuple[Any, Any, Any] | None:
        """Return (pi provider, api, model id) of the model pi resumes with; None when none is.

        As `provider_of` reads it; the api is "" for a `model_change` to a
        provider not in `PROVIDER_APIS`. One pass from the end; pi writes a
        parent before its children.
        """
        want: str | None = None  # the uid of the next record up the path
        for record in reversed(records):
            if record.error is not None or (want is not None and record.uid != want):
                continue
            if record.kind == "session":
                break
            # Only a model's entry is read back (a stored record's JSON is parsed again).
            model = record.kind == "model_change" or record.role is Role.ASSISTANT
            obj = record.obj if model else None
            if record.kind == "model_change" and isinstance(obj, dict):
                provider = obj.get("provider")
                api = PROVIDER_APIS.get(provider, "") if isinstance(provider, str) else ""
                return provider, api, obj.get("modelId")
            message = obj.get("message") if isinstance(obj, dict) else None
            if isinstance(message, dict):
                provider = message.get("provider")
                listed = PROVIDER_APIS.get(provider) if isinstance(provider, str) else None
                return provider, listed or message.get("api"), message.get("model")
            if record.parent is None:
                break
            want = record.parent
        return None

    def rewritten_ids(self, records: list[Record], provider: str) -> frozenset[int]:
        """Return the assistant records whose call ids pi rewrites for Anthropic or Bedrock.

        pi-ai's `transformMessages` (providers/transform-messages.js, 0.73.1)
        rewrites each call id of an assistant message written by another
        model than the one it sends to (its `provider`, `api` and `model`
        differ from the target's) with the converter's `normalizeToolCallId`:
        for Anthropic (providers/anthropic.js) and Bedrock
        (providers/amazon-bedrock.js) every character outside `[a-zA-Z0-9_-]`
        becomes `_`, cut to 64 characters (`pi_anthropic_id`), and each result
        of the call after it takes the same id. So an OpenAI Responses
        `call_…|fc_…` id of a session that switched to Claude reaches
        Anthropic valid. Only records with an id Anthropic refuses are
        returned, and not those:
        - of the very model pi resumes with (pi sends their ids as written),
          by provider and model id where the target's api is not known;
        - with a call whose rewritten id another call of the file is sent
          with (two calls would share one id): the repair renames those apart;
        - of any session when the model pi resumes with is not in the file.
        Empty for another provider.
        """
        if provider not in ("anthropic", "bedrock"):
            return frozenset()
        target = self._resumed_model(records)
        if target is None or not all(isinstance(part, str) for part in (target[0], target[2])):
            return frozenset()
        to_provider, to_api, to_model = target

        def rows() -> Iterable[tuple[int, str]]:
            if isinstance(records, RecordStore):
                return records.call_rows()
            return ((r.index, c.id) for r in records for c in r.calls)

        # One pass over the calls, kept as hashes in arrays (memory as the refused calls,
        # not the file's): each call pi changes when it rewrites its record (its record,
        # its id and the id sent: a refused id, or a valid one over 64 characters, which
        # is cut), and the ids written valid, which a rewritten id may become.
        refused: tuple[array[int], array[int], array[int]] = (array("q"), array("q"), array("q"))
        cut: tuple[array[int], array[int], array[int]] = (array("q"), array("q"), array("q"))
        valid: array[int] = array("q")
        for index, call_id in rows():
            if not call_id:
                continue
            if not valid_id(call_id):
                changes, sent_id = refused, pi_anthropic_id(call_id)
            else:
                valid.append(hash(call_id))
                if len(call_id) <= 64:
                    continue
                changes, sent_id = cut, call_id[:64]
            changes[0].append(index)
            changes[1].append(hash(call_id))
            changes[2].append(hash(sent_id))
        # A line without the target's model id written as a plain JSON string holds no
        # `model` equal to it, when no escape could spell it otherwise: told by its bytes.
        plain = _PLAIN_MODEL.fullmatch(to_model) is not None
        needle = orjson.dumps(to_model)
        rewritten: set[int] = set()
        lines: Iterable[tuple[int, bytes | None]]
        indexes = list(dict.fromkeys(refused[0]))  # in record order, each record once
        if not plain:
            lines = ((index, None) for index in indexes)
        elif isinstance(records, RecordStore):
            lines = records.plain_lines(indexes)
        else:
            lines = ((index, _plain_line(records[index])) for index in indexes)
        for index, raw in lines:
            if raw is not None:
                # Most lines hold no backslash at all: one memchr says there is no escape.
                escaped = b"\\" in raw and (b"\\u" in raw or b"\\/" in raw)
                if not escaped and needle not in raw:
                    rewritten.add(index)
                    continue
            obj = records[index].obj
            message = obj.get("message") if isinstance(obj, dict) else None
            if not isinstance(message, dict):
                continue
            same = (
                message.get("provider") == to_provider
                and message.get("model") == to_model
                and (not to_api or message.get("api") == to_api)
            )
            if not same:
                rewritten.add(index)
        if not rewritten:
            return frozenset()
        # Whether an id sent rewritten is also what another id written is sent as: two
        # rewritten ids that become one, or one that becomes an id written valid. (A refused
        # id that is not rewritten is sent as written, outside the alphabet: never one of
        # these.)

        def changed() -> Iterator[tuple[int, int, int]]:
            for changes in (refused, cut):
                for index, written, key in zip(*changes, strict=True):
                    if index in rewritten:
                        yield index, written, key

        sent: dict[int, int] = {}
        clashed: set[int] = set()
        for _, written, key in changed():
            if sent.setdefault(key, written) != written:
                clashed.add(key)
        clashed.update(filter(sent.__contains__, valid))
        if clashed:
            # Every record with a call sent as a clashing id is left out: one whose call is
            # sent as written (a valid id) too, not only those whose id pi changes. The
            # calls read again, rarely: a clash is rare.
            rewritten -= {
                index
                for index, call_id in rows()
                if index in rewritten and hash(pi_anthropic_id(call_id)) in clashed
            }
        return frozenset(rewritten)

    def _api_provider(self, api: object) -> str:
        """Return the provider that writes pi-ai `api`'s requests; the default when unknown."""
        return _PROVIDERS.get(api, self.provider) if isinstance(api, str) else self.provider

    def adjacent(self, provider: str) -> bool:
        # A pi session can switch provider at any model_change, so it must stay
        # valid for the strictest one.
        return True

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        assert op.call is not None
        call_entry = transcript.records[op.call.record].obj
        sibling = next((r.obj for r in transcript.records if r.role is Role.TOOL), None)
        message: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": op.call.id,
            "toolName": op.call.name,
            "content": [{"type": "text", "text": op.text}],
        }
        if op.text == INTERRUPTED_TEXT:
            message["details"] = {"ok": False, "error": "interrupted"}
        message["isError"] = True
        message["timestamp"] = call_entry.get("message", {}).get("timestamp")
        entry = {
            "type": "message",
            "id": self.new_uid(transcript, op),
            "parentId": None,
            "timestamp": call_entry.get("timestamp"),
            "message": ordered_like(sibling.get("message") if sibling else None, message),
        }
        return ordered_like(sibling, entry)

    def carry(self, transcript: Transcript, op: Op) -> Any:
        raise ValueError("pi/OpenClaw results are whole records; they move whole")

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        out = copy.copy(obj)
        content = obj["message"]["content"]
        out["message"] = dict(obj["message"], content=[content[j] for j in order])
        return out

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        message = obj["message"]
        if message.get("role") == "toolResult":
            message["toolCallId" if "toolCallId" in message else "toolUseId"] = new_id
            return
        super().rename_id(obj, block, new_id)

    def new_uid(self, transcript: Transcript, op: Op) -> str:
        assert op.call is not None
        call = op.call
        # A split is named by the record it comes out of, too: one turn may split twice.
        split = (op.record,) if op.blocks else ()
        return digest(transcript.records[call.record].uid, call.id, call.block, op.kind, *split)[:8]
