"""What every native format provides: record classification and new records in its shape."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from transcripts.core import jsontext
from transcripts.core.branch import uid_lookup
from transcripts.core.markers import may_be_marker, synthetic_marker
from transcripts.core.model import Op, OpKind, Record, Role, ToolCall, Transcript
from transcripts.core.store import RecordStore

# How sure a sniff is that a sample is its format, on pygments' `analyse_text`
# scale (0.0 no, 1.0 certain). The registry takes the highest; a format's
# `priority` breaks ties.
CERTAIN = 1.0  # a header or line envelope that only this format writes
SPECIFIC = 0.9  # a mark only this format has, on a shape that other formats share
LIKELY = 0.8  # the format's message shape, with the tool blocks or fields it names
LOOSE = 0.2  # the shape alone, no tool evidence: used only when no sniff is sure


class Format:
    """A native session format. Subclasses fill in the class attributes and hooks.

    `jsonl` formats hold one record per line; the others are one JSON document
    whose message array holds the records. Tree formats link records by
    `uid_key`/`parent_key` and are written back re-linked after a repair.
    """

    id: ClassVar[str] = ""
    label: ClassVar[str] = ""
    # Ranks formats whose sniffs are equally sure of a sample (higher wins), and
    # orders menus; unique in the registry.
    priority: ClassVar[int] = 0
    jsonl: ClassVar[bool] = True
    tree: ClassVar[bool] = False
    uid_key: ClassVar[str] = ""
    parent_key: ClassVar[str] = ""
    # A uid several records hold (a line logged twice) stands for the last of them, not the
    # first: pi indexes its entries in a Map by `id`, a later entry replacing an earlier
    # one (session-manager.js `_buildIndex`, `buildSessionContext`).
    last_copy: ClassVar[bool] = False
    # A parent no record holds is read as a link to an earlier record, not as a root (Claude
    # Code's walk falls back by time): a record a repair cuts from its chain gets a null one.
    lost_parent_falls_back: ClassVar[bool] = False
    # The member of a compaction record naming the first record it keeps (pi
    # `firstKeptEntryId`): re-pointed when a repair drops that record.
    keep_key: ClassVar[str] = ""
    provider: ClassVar[str] = "anthropic"
    # What the agent itself writes as the result of an interrupted call (formats.md §0.7).
    native_text: ClassVar[str] = "[Request interrupted by user for tool use]"
    # A session file an agent writes itself: the default policy answers in its words.
    agent: ClassVar[bool] = False
    # What the agent (or the provider, for a request body) does with a record it cannot read.
    malformed_note: ClassVar[str] = (
        "Sent as it is, an element that is not a message object makes the provider refuse "
        "the whole request."
    )

    def sniff(self, sample: list[Any], filename: str) -> float:
        """Return how sure this format is of `sample`: 0.0, or one of the tiers above LOOSE.

        `sample` is the first parsed lines of a JSONL file, or [the document's
        root]. A document format answers from `message_sniff`.
        """
        if self.jsonl:
            raise NotImplementedError
        return document_score(self, sample, filename, loose=False)

    def sniff_loose(self, sample: list[Any], filename: str) -> float:
        """Return LOOSE when `sample` could be this format though no sniff is sure, else 0.0."""
        return 0.0 if self.jsonl else document_score(self, sample, filename, loose=True)

    def message_sniff(self, root: Any, filename: str, loose: bool) -> float | MessageSniff:
        """Return a document format's sniff of the document `root` (`loose`: its loose one).

        The score itself when the root alone decides it; else the tests to put
        to each message of one array of the root, which may then be read a
        message at a time (a large document is never held whole). The root
        may stand with that array still empty: only the tests read its items.
        """
        return 0.0

    def classify(self, obj: Any, record: Record) -> None:
        """Fill `record`'s role, kind, calls, results, links and preview from `obj`."""
        raise NotImplementedError

    # True when `store_line` covers the common lines of this format.
    stores_lines: ClassVar[bool] = False

    def store_line(
        self, obj: dict[str, Any], store: RecordStore, start: int, end: int, line: int
    ) -> bool:
        """Append line `obj` (bytes `start:end`, 1-based `line`) to `store`, or return False.

        What a streamed load without summaries keeps of the line: the very
        fields `classify` and the loader's settling give, read straight from
        the JSON, no Record made. False (nothing appended) for a line the
        shortcut does not cover: the loader then classifies it as ever. May
        raise what reading the line raises; the loader then reads it as ever.
        """
        return False

    def continues(self, root: Any) -> bool:
        """Return True when a request body continues a conversation held server-side."""
        return False

    def finish(self, records: list[Record]) -> None:
        """Adjust records once all are classified (e.g. mark superseded ones inactive)."""

    def reads_tree(self, records: list[Record]) -> bool:
        """Return True when the agent reads `records` (of a `tree` format) as a tree.

        That is when some record's parent names another record's uid
        (`linked`): a file without one link is read in file order.
        """
        return linked(records)

    def provider_of(self, records: list[Record]) -> str:
        """Return the provider whose rules apply to a session of these records."""
        return self.provider

    def rewritten_ids(self, records: list[Record], provider: str) -> frozenset[int]:
        """Return the records whose call ids the agent rewrites for `provider` before sending.

        An id there that `provider` refuses is no fault: the agent sends it
        in the provider's alphabet (`Transcript.rewritten_ids`). None by default.
        """
        return frozenset()

    def adjacent(self, provider: str) -> bool:
        """Return True when results must directly follow their calling message.

        The Responses API accepts an output anywhere after its call; every other
        provider wants the results in the very next message(s).
        """
        return provider != "openai_responses"

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return a new record answering `op.call` with the error text `op.text`."""
        raise NotImplementedError

    def synthetic_group(self, transcript: Transcript, ops: tuple[Op, ...]) -> Any:
        """Return one new message holding the results of `ops` (`inline_results` formats).

        A synthetic result for an insert, the moved block for a move
        (`inline_result`), in the order of `ops`.
        """
        first = next((op for op in ops if op.kind is OpKind.INSERT_RESULT), None)
        message = self.synthetic(transcript, first) if first else self.carry(transcript, ops[0])
        message[self.content_key] = [self.inline_result(transcript, op) for op in ops]
        return message

    def carry(self, transcript: Transcript, op: Op) -> Any:
        """Return a new record holding only the result block `op` moves out of its record."""
        raise NotImplementedError

    inline_results: ClassVar[bool] = False
    # The role of the message a synthetic result is written as (a Claude Code `user` line).
    result_role: ClassVar[Role] = Role.TOOL
    content_key: ClassVar[str] = "content"  # where a message keeps its blocks
    results_on_calls: ClassVar[bool] = False
    # Where a JSON document keeps its message array, in order of preference.
    array_keys: ClassVar[tuple[str, ...]] = ("messages", "input")

    def keep(self, obj: Any, order: list[int], placed: Placed = ()) -> Any:
        """Return a copy of record `obj` holding the blocks numbered `order`, in that order.

        Each (at, block) of `placed` (see `inline_result`) goes before block
        number `at`, or at the end; only formats whose `inline_results` is True
        receive any.
        """
        raise NotImplementedError

    def inline_result(self, transcript: Transcript, op: Op) -> Any:
        """Return the result block `op` puts inside an existing message.

        A synthetic block for an insert; the block itself, from its record, for a move.
        """
        raise NotImplementedError

    def new_uid(self, transcript: Transcript, op: Op) -> str:
        """Return a deterministic id for the record `op` creates."""
        raise NotImplementedError

    def split(self, transcript: Transcript, op: Op) -> Any:
        """Return the new record holding blocks `op.blocks` of record `op.record` (a split).

        It is a copy of that record with those blocks only; in a file read as a
        tree it gets an id of its own (`new_uid`), its parent being set on
        writing. A chainless file of a tree format (`linked` False) gets no new
        id: one would make the copied parent a link, and the file a tree.
        """
        assert op.record is not None
        obj = self.keep(transcript.records[op.record].obj, list(op.blocks))
        if transcript.tree:
            obj[self.uid_key] = self.new_uid(transcript, op)
        return obj

    def rename_id(self, obj: Any, block: int, new_id: str) -> None:
        """Give the call or result of block `block` of record `obj` the tool call id `new_id`.

        `obj` is changed in place. The block is element `block` of the record's
        content list (under `content_key`, or its `message`'s); its id is the
        first of the keys every block format names it by, on the block or on
        the one object it wraps (Bedrock `toolUse`, Gemini `functionCall`).
        """
        content = obj.get(self.content_key)
        message = obj.get("message")
        if not isinstance(content, list) and isinstance(message, dict):
            content = message.get(self.content_key)
        set_id(content[block], new_id)


_ID_KEYS = ("id", "tool_use_id", "toolCallId", "toolUseId", "call_id", "tool_call_id")


def set_id(part: dict[str, Any], new_id: str) -> None:
    """Set the tool call id of a call or result block `part` (or the object it wraps)."""
    for key in _ID_KEYS:
        if isinstance(part.get(key), str):
            part[key] = new_id
            return
    for value in part.values():
        if isinstance(value, dict) and any(isinstance(value.get(k), str) for k in _ID_KEYS):
            set_id(value, new_id)
            return


Placed = tuple[tuple[int, Any], ...]

Test = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class MessageSniff:
    """A document sniff as tests of each message of one array: `score` when they pass.

    `array` names the array: None for the root itself, else the root's member
    holding it. The score is `score` when some message was seen, each test of
    `every` held for every message and each test of `some` for at least one;
    else 0.0. The tests take any JSON value and never raise.
    """

    array: str | None
    score: float
    every: tuple[Test, ...] = ()
    some: tuple[Test, ...] = ()

    def messages(self, root: Any) -> list[Any]:
        """Return the items of the array the tests read in `root` (a list, by construction)."""
        items = root if self.array is None else root[self.array]
        assert isinstance(items, list)
        return items

    def run(self, messages: list[Any]) -> float:
        """Return the score over all of `messages`."""
        if not messages:
            return 0.0
        every = all(all(test(m) for m in messages) for test in self.every)
        some = all(any(test(m) for m in messages) for test in self.some)
        return self.score if every and some else 0.0


def document_score(fmt: Format, sample: list[Any], filename: str, loose: bool) -> float:
    """Return `fmt`'s sniff (`loose`: its loose one) of `sample`, [a document's root]."""
    root = sample[0] if len(sample) == 1 else None
    found = fmt.message_sniff(root, filename, loose)
    return found if isinstance(found, float) else found.run(found.messages(root))


def sniff_messages(
    root: Any, score: float, every: tuple[Test, ...] = (), some: tuple[Test, ...] = ()
) -> float | MessageSniff:
    """Return the sniff putting these tests to a document's messages.

    They are the root itself when it is an array, or its `messages` array (a
    request body, formats.md §2); 0.0 for a root that holds neither.
    """
    if isinstance(root, dict) and isinstance(root.get("messages"), list):
        return MessageSniff("messages", score, every, some)
    return MessageSniff(None, score, every, some) if isinstance(root, list) else 0.0


def linked(records: list[Record]) -> bool:
    """Return True when some record's `parent` names another record's `uid`.

    A tree format's file without one link (Claude Code lines that lack
    `uuid`/`parentUuid`, written by older versions or other tools, or a pi v1
    session) has no chain to follow: it is read in file order, and a repair
    writes no links into it.
    """
    if isinstance(records, RecordStore) and records.chained():
        return True  # known as the records were stored: no scan
    by_uid = uid_lookup(records)
    return any(
        r.parent is not None and r.parent != r.uid and by_uid(r.parent) is not None for r in records
    )


def merge_blocks(blocks: list[Any], order: list[int], placed: Placed) -> list[Any]:
    """Return `blocks` numbered `order`, with each placed block before its number `at`."""
    before: dict[int, list[Any]] = {}
    for at, block in placed:
        before.setdefault(at, []).append(block)
    out: list[Any] = []
    for j in order:
        out.extend(before.pop(j, ()))
        if j < len(blocks):
            out.append(blocks[j])
    for at in sorted(before):
        out.extend(before[at])
    return out


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


_ARGS_KEPT = 240  # characters of long arguments kept in full; the rest become a digest


def canonical(args: Any) -> str:
    """Return call arguments as canonical JSON text: equal arguments, equal text.

    Long arguments (a file's whole content, say) are cut to their start plus
    a digest of the whole, so a session's calls cost little memory while
    still comparing equal exactly when their arguments do.
    """
    if isinstance(args, str):
        text = args
    else:
        try:
            text = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:  # integers beyond 64 bits, or nesting beyond orjson's limit
            try:
                text = json.dumps(args, sort_keys=True, ensure_ascii=False)
            except RecursionError:
                text = repr(args)
    if len(text) <= _ARGS_KEPT:
        return text
    whole = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    return f"{text[:_ARGS_KEPT]}…#{whole}"


def args_digest(args: str) -> str:
    """Return a 13-character digest of a call's canonical arguments text ("" stays "").

    What a streamed session keeps of each call's arguments when it shows no
    rows: equal arguments still give equal text (`detect` compares a turn's
    calls so), at a fraction of the memory.
    """
    if not args:
        return ""
    whole = hashlib.blake2b(args.encode("utf-8", "surrogatepass"), digest_size=9).digest()
    return "#" + base64.urlsafe_b64encode(whole).decode()


def call_problem(call_id: Any, name: Any, args: Any, partial: bool = False) -> str:
    """Return why a tool call is malformed, or "" when it is well formed.

    The rules are the ones OpenClaw applies before persisting a call
    (integrity-semantics.md §1B, B-2): an id, a name of letters, digits, `_`
    and `-` of at most 64 characters, and arguments that arrived whole.
    """
    if not isinstance(call_id, str) or not call_id.strip():
        return "the call has no id"
    if not isinstance(name, str) or not name.strip():
        return "the call has no tool name"
    if not _NAME.match(name.strip()):
        return f"the tool name {name[:80]!r} is not valid (letters, digits, _ and -, at most 64)"
    if partial:
        return "the call's arguments were cut off mid-stream (partialJson)"
    return _args_problem(args)


def _args_problem(args: Any) -> str:
    """Return why a call's arguments are malformed (see `call_problem`), or ""."""
    if args is None:
        return "the call has no arguments"
    if isinstance(args, str):
        try:
            jsontext.loads(args)
        except orjson.JSONDecodeError as exc:
            if exc.msg.startswith("Not enough memory"):  # not the arguments' fault
                raise MemoryError("not enough memory to parse a tool call's arguments") from exc
            return f"the call's arguments are not valid JSON ({exc.msg}); cut off mid-stream?"
    return ""


def add_call(
    record: Record, block: int, call_id: Any, name: Any, args: Any, *, partial: bool = False
) -> ToolCall:
    """Append the tool call of block `block` to `record` (ids and names as read) and return it.

    Its arguments are kept as `canonical` text; `call_problem` says whether it
    is malformed (`partial`: its arguments were cut off mid-stream).
    """
    call = ToolCall(
        str(call_id or ""),
        # Few tool names recur in thousands of calls: one string for each.
        sys.intern(name) if isinstance(name, str) else "",
        record.index,
        block,
        canonical(args),
        call_problem(call_id, name, args, partial),
    )
    record.calls.append(call)
    return call


# A call as a streamed load keeps it: (block, id, name, args digest, problem).
CallRow = tuple[int, str, str, str, str]
# A result as a streamed load keeps it: (block, tool call id, is_error, text).
ResultRow = tuple[int, str, bool, str]

_NAME_PROBLEMS: dict[str, str] = {}  # tool names seen lately -> their problem ("" when valid)


def call_row(block: int, call_id: Any, name: Any, args: Any, partial: bool) -> CallRow:
    """Return the call `add_call` makes, as a load without summaries keeps it (args digested).

    The same id, name, `args_digest(canonical(args))` and `call_problem`,
    without a ToolCall made. Raises TypeError for an id that is neither a
    string nor empty (its text is for `add_call` to make: the line is read as ever).
    """
    if call_id and not isinstance(call_id, str):
        raise TypeError("a tool call id that is not a string")
    if isinstance(name, str) and isinstance(call_id, str) and call_id.strip() and not partial:
        problem = _name_problem(call_id, name) or _args_problem(args)
    else:
        problem = call_problem(call_id, name, args, partial)
    return (
        block,
        call_id or "",
        name if isinstance(name, str) else "",
        _digested(args),
        problem,
    )


def _name_problem(call_id: str, name: str) -> str:
    """Return `call_problem` of a call with a well-formed id and empty arguments, by name.

    Few tool names recur in thousands of calls: each one's check is made once.
    """
    problem = _NAME_PROBLEMS.get(name)
    if problem is None:
        if len(_NAME_PROBLEMS) >= 4096:
            _NAME_PROBLEMS.clear()
        problem = _NAME_PROBLEMS[name] = call_problem(call_id, name, {})
    return problem


def canonical_call_row(block: int, call_id: Any, name: Any, data: bytes) -> CallRow:
    """Return `call_row(block, call_id, name, orjson.loads(data), False)` for canonical `data`.

    `data` is a JSON object as `orjson.dumps` writes it with sorted keys (the
    line scanner says so): its digest is taken of these bytes, never parsed.
    """
    if isinstance(name, str) and isinstance(call_id, str) and call_id.strip():
        return (block, call_id, name, _bytes_digest(data), _name_problem(call_id, name))
    return call_row(block, call_id, name, orjson.loads(data), False)


def _digested(args: Any) -> str:
    """Return `args_digest(canonical(args))`, with orjson's bytes written once, never decoded whole.

    orjson writes UTF-8 with no surrogates, so its bytes are the text's
    `surrogatepass` encoding, and at most _ARGS_KEPT bytes are at most as
    many characters: `canonical` keeps such a text whole. A longer text's
    cut is its first characters, read from its first bytes.
    """
    if isinstance(args, str):
        return args_digest(canonical(args))
    try:
        data = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # nesting beyond orjson's limit: as `canonical` reads it
        return args_digest(canonical(args))
    return _bytes_digest(data)


def _bytes_digest(data: bytes) -> str:
    """Return `args_digest(canonical(args))` of the arguments orjson writes as `data`."""
    if len(data) > _ARGS_KEPT:
        # A character is at most 4 bytes: these bytes hold the text whole, or more than its
        # first _ARGS_KEPT characters (a character cut at their end is dropped).
        head = data[: 4 * _ARGS_KEPT + 4].decode("utf-8", "ignore")
        if len(head) > _ARGS_KEPT:
            # `canonical`'s cut text, its digest of the whole taken of these same bytes.
            whole_text = hashlib.blake2b(data, digest_size=12).hexdigest()
            return args_digest(f"{head[:_ARGS_KEPT]}…#{whole_text}")
    whole = hashlib.blake2b(data, digest_size=9).digest()
    return "#" + base64.urlsafe_b64encode(whole).decode()


def result_row(block: int, tool_call_id: Any, is_error: bool, content: Any) -> ResultRow:
    """Return a result as a load without summaries keeps it: its text only if a marker.

    Its text is `result_text(content)`. Raises TypeError for an id that is
    neither a string nor empty.
    """
    if tool_call_id and not isinstance(tool_call_id, str):
        raise TypeError("a tool call id that is not a string")
    return (block, tool_call_id or "", is_error, result_text(content))


def result_text(content: Any) -> str:
    """Return what a load without previews keeps of a result's `content`: a marker's text, or "".

    The `marker_text` of `content`, but a list whose first block's text
    starts no marker within its first 32 characters is not previewed at all
    (a preview starts with that text). `preview` never raises, so skipping
    it changes nothing but the time.
    """
    first = content[0] if isinstance(content, list) and content else None
    if isinstance(first, dict) and isinstance(head := first.get("text"), str):
        return marker_text(content) if may_be_marker(head[:32]) else ""
    return marker_text(content)


def marker_text(content: Any) -> str:
    """Return the preview of a result's `content` if it is an earlier repair's marker, else "".

    What a result keeps of its text without previews. A text whose first
    character starts no marker is not previewed at all.
    """
    if isinstance(content, str) and not may_be_marker(content):
        return ""
    text = preview(content)
    return text if synthetic_marker(text) else ""


def digest(*parts: object) -> str:
    """Return a hex sha256 of `parts`: the seed of deterministic ids for new records.

    A lone surrogate in a part (an id cut mid-pair by a Node program) is hashed
    as its `surrogatepass` bytes; every other text as its UTF-8, as ever.
    """
    text = "\x1f".join(map(str, parts))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# False while a load keeps no previews of messages (see `without_previews`).
_PREVIEWS: ContextVar[bool] = ContextVar("pairfix_previews", default=True)


@contextmanager
def without_previews() -> Iterator[None]:
    """Within this block, classifying a message may leave its `Record.text` empty.

    For a load that drops the previews of messages anyway (`formats.load`
    with `summaries` False): making them costs time for nothing. A result's
    text is still read (an earlier repair's marker is recognised by it), and
    so is any value whose reading could fail: a record reads as malformed,
    or a file as unreadable, exactly as with previews.
    """
    token = _PREVIEWS.set(False)
    try:
        yield
    finally:
        _PREVIEWS.reset(token)


def previews_kept(record: Record) -> bool:
    """Return True unless a load keeps no preview of this message (META records keep theirs)."""
    return _PREVIEWS.get() or record.role is Role.META


def preview(value: Any, limit: int = 160, depth: int = 0) -> str:
    """Return a one-line preview of a text or JSON value, at most `limit` characters."""
    if depth > 8:
        return "…"
    if isinstance(value, str):
        # Whitespace runs collapse, so a little more than the limit is enough to look at.
        text = value[: limit + 200]
    elif isinstance(value, list):
        parts: list[str] = []
        size = 0
        for item in value:
            if size > limit:
                break
            parts.append(preview(item, limit, depth + 1))
            size += len(parts[-1]) + 1
        text = " ".join(parts)
    elif isinstance(value, dict):
        if isinstance(value.get("text"), str):
            text = value["text"]
        elif "content" in value:
            text = preview(value["content"], limit, depth + 1)
        else:
            text = canonical(value)
    elif value is None:
        text = ""
    else:
        text = str(value)
    return _collapsed(text, limit)


def _collapsed(text: str, limit: int) -> str:
    """Return `text` with whitespace runs collapsed, cut to `limit` characters.

    Collapses a prefix, doubling it until it yields more than `limit`
    characters: the collapsed prefix is a prefix of the collapsed whole, so
    the result is the same as collapsing all of a long text, at the cost of
    its start.
    """
    size = 2 * limit + 64
    while True:
        part = text[:size]
        collapsed = " ".join(part.split())
        if len(collapsed) > limit:
            return collapsed[: limit - 1] + "…"
        if len(part) == len(text):
            return collapsed
        size *= 4
