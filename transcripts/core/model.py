"""The canonical transcript model every native format is parsed into.

A transcript is a list of records in file order. A record is one JSONL line or
one element of a JSON message array; it keeps its byte span in the raw file so
that export can splice untouched records verbatim (DESIGN.md, contract 6).
Tool calls and tool results are addressed by (record index, block index).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from transcripts.core import jsontext

# Prefix of the ids a format gives calls and results that carry none (legacy OpenAI
# functions, Gemini without `id`), made from the tool name and position so that
# they pair the way the provider does. They are never written back.
POSITIONAL = "@"


class RawSource(Protocol):
    """Bytes read by range: a session file too large to hold in memory whole."""

    def __getitem__(self, where: slice, /) -> bytes: ...

    def __len__(self) -> int: ...

    def endswith(self, suffix: bytes, /) -> bool: ...


class Role(StrEnum):
    """Who a record speaks for, once its native shape is normalised."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"
    META = "meta"  # not sent to the model: snapshots, headers, settings changes


class FaultKind(StrEnum):
    """Stable fault-kind ids (DESIGN.md): used in the database, URLs, CSS and the API."""

    MISSING_RESULT = "missing_result"
    PENDING_RESULT = "pending_result"
    ORPHANED_RESULT = "orphaned_result"
    DUPLICATE_RESULT = "duplicate_result"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    DISPLACED_RESULT = "displaced_result"
    MISORDERED_RESULTS = "misordered_results"
    RESULT_NOT_FIRST = "result_not_first"
    CONTENT_AFTER_CALL = "content_after_call"
    ABORTED_FRAME = "aborted_frame"
    MALFORMED_CALL = "malformed_call"
    MALFORMED_RECORD = "malformed_record"
    EXISTING_SYNTHETIC = "existing_synthetic"
    ORPHANED_REASONING = "orphaned_reasoning"
    PARENT_LOOP = "parent_loop"


# Kinds that report a fact rather than something to fix (shown as information).
INFORMATIONAL = frozenset({FaultKind.EXISTING_SYNTHETIC})


class Action(StrEnum):
    """What a policy row does about one fault kind."""

    SYNTHESIZE = "synthesize"
    DROP = "drop"
    MOVE = "move"
    KEEP_FIRST = "keep_first"
    KEEP_LAST = "keep_last"
    KEEP = "keep"
    FLAG = "flag"
    RENAME = "rename"


class OpKind(StrEnum):
    """One edit of a plan."""

    INSERT_RESULT = "insert_result"  # a synthetic result after `anchor`, or inside `target`
    DROP_RESULT = "drop_result"  # remove one tool result block (the record if nothing remains)
    MOVE_RESULT = "move_result"  # relocate one tool result block: after `anchor`, or into `target`
    DROP_CALL = "drop_call"  # remove one tool call block (the record if nothing remains)
    DROP_RECORD = "drop_record"  # remove a whole record (an interrupted assistant frame)
    RESULTS_FIRST = "results_first"  # put a record's tool results before its other content
    RENAME_ID = "rename_id"  # give the call or result at `record`/`block` the tool call id `text`
    # Carry an assistant message's content after its calls (`blocks`) into a message of its
    # own after the results; SPLIT_REPLY carries the user content after those results.
    SPLIT_AFTER_CALL = "split_after_call"
    SPLIT_REPLY = "split_reply"
    DROP_CONTENT = "drop_content"  # leave the blocks `blocks` out of record `record`
    RELINK = "relink"  # write record `record` as the root of its branch (a parent loop broken)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call: `id` is the provider's tool call id (`tool_use.id`, `tool_calls[].id`).

    `args` is the call's arguments as canonical JSON text (equal calls, equal text);
    `problem` says why the call is malformed (no id, bad name, partial arguments),
    empty when it is well formed. `family` names the kind of exchange where a
    format has several that do not answer each other (Codex: a
    `custom_tool_call` is answered by a `custom_tool_call_output` only, never
    by a `function_call_output`); "" elsewhere.
    """

    id: str
    name: str
    record: int
    block: int
    args: str = ""
    problem: str = ""
    family: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool result answering the call whose id is `tool_call_id`; `text` is a preview.

    It answers only a call of its own `family` (see ToolCall).
    """

    tool_call_id: str
    record: int
    block: int
    is_error: bool = False
    text: str = ""
    family: str = ""


# Bits of Record._bits: its flags; `other_blocks` is the number above them.
_BOUNDARY, _SIDECHAIN, _ABORTED, _INTERRUPTED, _INACTIVE, _LEADS = (1 << k for k in range(6))
_OTHER_SHIFT = 6
# Record._at packs (index, line, start, end), index highest (it may be -1): one
# integer of five digits instead of four objects. Offsets are below 1 TiB, lines
# below 2**32.
_SPAN_BITS, _LINE_BITS = 40, 32
_SPAN_MASK, _LINE_MASK = (1 << _SPAN_BITS) - 1, (1 << _LINE_BITS) - 1
_LINE_SHIFT = 2 * _SPAN_BITS
_INDEX_SHIFT = _LINE_SHIFT + _LINE_BITS
_FLAGS_MASK = (1 << _OTHER_SHIFT) - 1
# Record fields kept in Record._rare when set, with their defaults.
_RARE_DEFAULTS: dict[str, Any] = {
    "timestamp": None,
    "keep_from": None,
    "attached": (),
    "relinked_from": None,
    "error": None,
}


@dataclass(slots=True, init=False)
class Record:
    """One record of a transcript, in file order.

    `start`/`end` are byte offsets of the record's own bytes in the raw file
    (without the line terminator for JSONL). `uid`/`parent` carry the native
    tree links (Claude Code `uuid`/`parentUuid`, pi `id`/`parentId`);
    `message_id` groups records that one API response was split into.
    `obj` is the parsed JSON value, or None for a malformed record; a record of
    a streamed file lets it go (`parsed` is None) and re-reads it from `source`
    (anything sliceable into bytes) when asked. `aborted`
    marks an assistant frame that errored or was aborted (pi-ai drops those
    before sending); `interrupted` one that also stopped on its length limit or
    carries an error message (OpenMAIC's "interrupted assistant frame").
    `inactive` marks a record kept in the file but no longer part of the
    conversation: superseded by a later write of the same message, or rewound.
    `leads` marks a record that must be followed by the item it produced (a
    Responses `reasoning` item): it goes when everything it leads goes.
    `attached` lists blocks that belong to a call rather than being content of
    their own (a Vercel AI SDK `tool-approval-request`): never content after it.
    `relinked_from` is the parent id as written when the reader re-linked the
    record (`parent` then holds the entry it belongs under): a pi result whose
    `parentId` names its call's tool call id rather than the call's entry, or
    names no entry of the file, or is null ("" here), at the end of pi's walk.

    A long session holds hundreds of thousands of records, so the flags and
    `other_blocks` share one integer, and the fields most records leave at
    their default (`timestamp`, `keep_from`, `attached`, `relinked_from`,
    `error`) live in a dict made only for a record that sets one: attributes
    read and written as ever. `index`, `line`, `start` and `end` (read only)
    share one integer too: about 230 bytes a record rather than 350.
    """

    _at: int
    role: Role
    kind: str
    parsed: Any
    calls: list[ToolCall]
    results: list[ToolResult]
    text: str
    uid: str | None
    parent: str | None
    message_id: str | None
    source: Any
    _bits: int
    _rare: dict[str, Any] | None

    def __init__(
        self,
        index: int,
        start: int,
        end: int,
        role: Role,
        kind: str,
        parsed: Any = None,
        calls: list[ToolCall] | None = None,
        results: list[ToolResult] | None = None,
        other_blocks: int = 0,
        text: str = "",
        uid: str | None = None,
        parent: str | None = None,
        message_id: str | None = None,
        timestamp: str | None = None,
        boundary: bool = False,
        keep_from: str | None = None,
        sidechain: bool = False,
        aborted: bool = False,
        interrupted: bool = False,
        inactive: bool = False,
        leads: bool = False,
        attached: tuple[int, ...] = (),
        relinked_from: str | None = None,
        error: str | None = None,
        line: int = 0,
        source: Any = None,
    ) -> None:
        if (start | end) >> _SPAN_BITS or line >> _LINE_BITS:
            raise ValueError(f"record offsets {start}-{end} or line {line} out of range")
        self._at = (((index << _LINE_BITS) | line) << _LINE_SHIFT) | (start << _SPAN_BITS) | end
        self.role, self.kind = role, kind
        self.parsed = parsed
        self.calls = [] if calls is None else calls
        self.results = [] if results is None else results
        self.text, self.uid, self.parent, self.message_id = text, uid, parent, message_id
        self.source = source
        self._bits = (
            (other_blocks << _OTHER_SHIFT)
            | (_BOUNDARY if boundary else 0)
            | (_SIDECHAIN if sidechain else 0)
            | (_ABORTED if aborted else 0)
            | (_INTERRUPTED if interrupted else 0)
            | (_INACTIVE if inactive else 0)
            | (_LEADS if leads else 0)
        )
        if timestamp is keep_from is relinked_from is error is None and attached == ():
            self._rare = None  # nearly every record: no dict to make and drop
            return
        rare = {
            "timestamp": timestamp,
            "keep_from": keep_from,
            "attached": attached,
            "relinked_from": relinked_from,
            "error": error,
        }
        self._rare = {k: v for k, v in rare.items() if v != _RARE_DEFAULTS[k]} or None

    @property
    def index(self) -> int:
        """Return the record's position in its transcript (-1 for a record not in one)."""
        return self._at >> _INDEX_SHIFT

    @property
    def start(self) -> int:
        """Return the byte offset where the record starts in the raw file."""
        return (self._at >> _SPAN_BITS) & _SPAN_MASK

    @property
    def end(self) -> int:
        """Return the byte offset just past the record's own bytes."""
        return self._at & _SPAN_MASK

    @property
    def line(self) -> int:
        """Return the 1-based line of the file the record starts on."""
        return (self._at >> _LINE_SHIFT) & _LINE_MASK

    def _flag(self, bit: int) -> bool:
        return bool(self._bits & bit)

    def _set_flag(self, bit: int, value: bool) -> None:
        self._bits = self._bits | bit if value else self._bits & ~bit

    def _get_rare(self, name: str) -> Any:
        rare = self._rare
        return rare.get(name, _RARE_DEFAULTS[name]) if rare else _RARE_DEFAULTS[name]

    def _set_rare(self, name: str, value: Any) -> None:
        if value == _RARE_DEFAULTS[name]:
            if self._rare:
                self._rare.pop(name, None)
                self._rare = self._rare or None
            return
        if self._rare is None:
            self._rare = {}
        self._rare[name] = value

    @property
    def other_blocks(self) -> int:
        """Return how many blocks of the record are neither calls nor results."""
        return self._bits >> _OTHER_SHIFT

    @other_blocks.setter
    def other_blocks(self, value: int) -> None:
        self._bits = (value << _OTHER_SHIFT) | (self._bits & _FLAGS_MASK)

    @property
    def boundary(self) -> bool:
        return self._flag(_BOUNDARY)

    @boundary.setter
    def boundary(self, value: bool) -> None:
        self._set_flag(_BOUNDARY, value)

    @property
    def sidechain(self) -> bool:
        return self._flag(_SIDECHAIN)

    @sidechain.setter
    def sidechain(self, value: bool) -> None:
        self._set_flag(_SIDECHAIN, value)

    @property
    def aborted(self) -> bool:
        return self._flag(_ABORTED)

    @aborted.setter
    def aborted(self, value: bool) -> None:
        self._set_flag(_ABORTED, value)

    @property
    def interrupted(self) -> bool:
        return self._flag(_INTERRUPTED)

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self._set_flag(_INTERRUPTED, value)

    @property
    def inactive(self) -> bool:
        return self._flag(_INACTIVE)

    @inactive.setter
    def inactive(self, value: bool) -> None:
        self._set_flag(_INACTIVE, value)

    @property
    def leads(self) -> bool:
        return self._flag(_LEADS)

    @leads.setter
    def leads(self, value: bool) -> None:
        self._set_flag(_LEADS, value)

    @property
    def timestamp(self) -> str | None:
        return self._get_rare("timestamp")  # type: ignore[no-any-return]

    @timestamp.setter
    def timestamp(self, value: str | None) -> None:
        self._set_rare("timestamp", value)

    @property
    def keep_from(self) -> str | None:
        return self._get_rare("keep_from")  # type: ignore[no-any-return]

    @keep_from.setter
    def keep_from(self, value: str | None) -> None:
        self._set_rare("keep_from", value)

    @property
    def attached(self) -> tuple[int, ...]:
        return self._get_rare("attached")  # type: ignore[no-any-return]

    @attached.setter
    def attached(self, value: tuple[int, ...]) -> None:
        self._set_rare("attached", value)

    @property
    def relinked_from(self) -> str | None:
        return self._get_rare("relinked_from")  # type: ignore[no-any-return]

    @relinked_from.setter
    def relinked_from(self, value: str | None) -> None:
        self._set_rare("relinked_from", value)

    @property
    def error(self) -> str | None:
        return self._get_rare("error")  # type: ignore[no-any-return]

    @error.setter
    def error(self, value: str | None) -> None:
        self._set_rare("error", value)

    @property
    def obj(self) -> Any:
        """Return the parsed JSON value of the record (None when malformed)."""
        if self.parsed is None and self.source is not None and self.error is None:
            return jsontext.loads(self.source[self.start : self.end])
        return self.parsed

    @obj.setter
    def obj(self, value: Any) -> None:
        self.parsed = value


class ValueWriter(Protocol):
    """Writes one JSON value the way a file does (`formats._json.Style` is one)."""

    def dumps(self, value: Any) -> str: ...


@dataclass(frozen=True, slots=True)
class Style:
    """How a file writes what lies between and around its records, so new ones read alike.

    The model is tomlkit's `Trivia`: the formatting read from the file, typed,
    kept beside the values (DESIGN.md contract 6). `element` writes a new or
    changed record's JSON as the file's first record is written (separators,
    indent, ASCII escaping); None when no record could be read. `eol` is the
    line end of a JSONL file (its first), written after a new record; `sep`
    what stands between two elements of a JSON document (for a one-element
    array: the comma, break and indent it would take). `renamed` holds the
    records a `rename_id` changed: written anew from their value, not copied.
    """

    element: ValueWriter | None = None
    eol: bytes = b"\n"
    sep: bytes = b""
    renamed: frozenset[int] = frozenset()


@dataclass(slots=True)
class Transcript:
    """A parsed session: its records plus what export needs to write it back.

    `format` is a format id of `transcripts.formats` and `provider` the API the
    session talks to (`anthropic`, `openai_chat`, `openai_responses`, `gemini`),
    which decides the error texts and ordering rules that apply.
    `tree` is True when records link by `uid`/`parent` and order follows the links;
    `last_copy` is True when a uid several records hold stands for the last of them
    (pi's index of entries by id), False for the first.
    `adjacent` is True when results must come right after their calling message
    (every provider but Responses; always for sessions that may switch provider).
    `inline_results` is True when one user message carries several results as
    blocks (Anthropic Messages): a synthetic result then opens the next user
    message instead of becoming a message of its own (formats.md §1).
    `result_role` is the role of the message a synthetic result is written as
    (`user` where results travel in user messages, as in Anthropic's API).
    `results_on_calls` is True when a call's result is written on the call
    itself (Gemini CLI `toolCalls[].result`): a synthetic result goes there.
    `native_text` is the text the session's own agent writes for an interrupted call.
    `agent` is True for a session file an agent writes itself (Claude Code,
    Codex, OpenClaw/pi, Gemini CLI): the default policy answers in its words.
    `server_history` is True for a Responses request that continues a stored
    response (`previous_response_id` or `conversation`): outputs may answer
    calls that live server-side. `malformed_note` says what the agent does
    with a line it cannot read. `rewritten_ids` holds the indexes of the
    records whose tool call ids the agent itself rewrites into `provider`'s
    alphabet before it sends them (pi, for a message another model wrote):
    an id there outside Anthropic's pattern is no fault.
    """

    format: str
    provider: str
    records: list[Record]
    raw: bytes | RawSource
    filename: str = ""
    tree: bool = False
    last_copy: bool = False
    adjacent: bool = True
    inline_results: bool = False
    result_role: Role = Role.TOOL
    results_on_calls: bool = False
    native_text: str = "[Request interrupted by user for tool use]"
    style: Style = field(default_factory=Style)
    agent: bool = False
    server_history: bool = False
    malformed_note: str = ""
    rewritten_ids: frozenset[int] = frozenset()
    # `core.branch.branch_paths`, kept once found: pairing and rendering both walk them.
    # Not an init field, so `dataclasses.replace` (a renamed copy) finds them anew.
    paths: list[array[int]] | None = field(default=None, init=False, repr=False, compare=False)
    # `core.branch.uid_lookup` of a list of records, kept once made (a store keeps its own).
    uid_index: Callable[[str], int | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )


@dataclass(frozen=True, slots=True)
class Fault:
    """One integrity fault found by `detect`.

    `record`/`block` locate the offending call or result in the raw file;
    `turn` is the record index of the assistant message the fault belongs to
    (None when none does); `error` is the text the provider answers with.
    """

    kind: FaultKind
    tool_call_id: str | None
    record: int
    block: int | None = None
    turn: int | None = None
    error: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Op:
    """One edit of a plan, naming the fault it mends and the policy row that chose it.

    `record`/`block` locate what the op removes or moves. An inserted or moved
    result goes either into a record of its own after record `anchor`, or, for
    formats whose messages hold several results, into record `target` before
    its block `at` (block numbers as read; past the last block: at the end).
    `call` is the call answered; `text` the text of a synthetic result, or the
    new tool call id of a `rename_id`. `blocks` are the blocks a split carries.
    """

    kind: OpKind
    fault: Fault
    policy_row: str
    record: int | None = None
    block: int | None = None
    anchor: int | None = None
    call: ToolCall | None = None
    text: str = ""
    target: int | None = None
    at: int = 0
    blocks: tuple[int, ...] = ()

    @property
    def tool_call_id(self) -> str | None:
        """Return the tool call id the op is about."""
        return self.fault.tool_call_id

    @property
    def place(self) -> int | None:
        """Return the record the op removes or moves, else the one its result goes into or after.

        What a report names as the op's record (`pairfix check --json`, an
        export's manifest), so both say the same of one op.
        """
        if self.record is not None:
            return self.record
        return self.target if self.target is not None else self.anchor


@dataclass(frozen=True, slots=True)
class Plan:
    """The ordered ops that repair a transcript under `policy`; empty when healthy.

    `resumed` are the raw indexes of the leaves of branches the repaired file
    resumes from instead of the live one, whose end the ops drop (a tree
    format's; `core.branch.resumed_leaf`), in the order they were paired: the
    last is where the repaired session resumes. Their links are written as
    the live branch's are.
    """

    policy: str
    ops: tuple[Op, ...] = ()
    resumed: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ops)
