"""Read native session files: sniff their format, parse them into a Transcript.

A file is JSON lines (streamed, one record per line) or one JSON document
whose message array holds the records; each record keeps its byte span, so
`render` can splice it back verbatim. Sniffing follows formats.md §9 through
the registry (`registry.sniff`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import orjson

from transcripts.core import jsontext
from transcripts.core.markers import synthetic_marker
from transcripts.core.model import Record, Role, Style, ToolResult, Transcript
from transcripts.core.store import SETTLED_EMPTY, RecordStore
from transcripts.formats import linescan, registry
from transcripts.formats._json import (
    ScanError,
    array_spans,
    scan_array,
    scan_object,
    skip_blank,
    skip_ws,
    sniff_style,
    value_end,
)
from transcripts.formats.base import Format, args_digest, without_previews
from transcripts.formats.registry import FORMATS
from transcripts.formats.source import FileSource, Taker, iter_lines
from transcripts.formats.streams import agent_file, stream_refusal

_SNIFF_LINES = 50
# A session may open with many lines no sniff can place (Claude Code's summary and
# file-history-snapshot lines): the sample then doubles, up to this many records.
_SNIFF_MOST = 3200
_RECENT_CALLS = 4096  # call ids a streamed file keeps for its results to share
_UNKNOWN_DOCUMENT = (
    "unknown format: a JSON document of none of the formats Pairfix reads (message arrays "
    "of OpenAI, Anthropic, Bedrock, Gemini, LangChain, Vercel AI, Responses or OpenHands, "
    "or a Gemini CLI session)"
)
_UNKNOWN_OBJECT = (
    "unknown format: one JSON object, neither a line of a session's JSON lines nor a JSON "
    "document of the formats Pairfix reads"
)
_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_BOM = b"\xef\xbb\xbf"
# Where a document may keep its message array: the root members a format reads it from.
_ARRAY_KEYS = frozenset(key for f in FORMATS.values() if not f.jsonl for key in f.array_keys)
_DEEPEST = 256  # levels an element read on its own may nest (orjson refuses beyond 1024)
_GUESS_ITEMS = 50  # elements read before the format is guessed, to classify the rest as read
_GUESS_BYTES = 1 << 20  # ... or fewer, once they hold this many bytes


class FormatError(ValueError):
    """A file Pairfix cannot read: names the file, the line and the reason.

    `format` is the format id when it was known (None when sniffing failed);
    `records` how many records were read before giving up; `unknown` is True
    when the file is valid JSON or JSON lines of no format Pairfix reads, or
    JSON lines after a first line that is no JSON (not a session file, rather
    than a broken one); `agent_file` then names an
    agent's own file that is no session ("Claude Code's prompt history ...").
    `packing` names the compression or archive the file is in ("gzip",
    "zip"; "" when none was recognised).
    """

    def __init__(
        self,
        filename: str,
        line: int,
        reason: str,
        format: str | None = None,
        records: int = 0,
        *,
        unknown: bool = False,
        agent_file: str = "",
        packing: str = "",
    ) -> None:
        super().__init__(f"{filename}: line {line}: {reason}")
        self.filename = filename
        self.line = line
        self.reason = reason
        self.format = format
        self.records = records
        self.unknown = unknown or bool(agent_file)
        self.agent_file = agent_file
        self.packing = packing


def _decode_reason(message: str) -> str:
    """Return orjson's message in a user's words where it speaks of its internals."""
    if "UTF-8" in message:
        return "invalid UTF-8 (the line holds bytes that are not text)"
    return message


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def load(
    data: bytes | FileSource, filename: str, format: str | None = None, *, summaries: bool = True
) -> Transcript:
    """Parse `data` (the bytes of `filename`, or the file itself) into a Transcript.

    With `summaries` False, a streamed file's messages keep no preview text
    (`Record.text`, and `ToolResult.text` but for an earlier repair's marker)
    and their calls' `args` are digests (`base.args_digest`): what detecting
    and repairing need, not what showing rows needs, so a long session costs
    less memory per record. A JSON document's messages (streamed or not) then
    keep no `Record.text`, and a result's text may be "" unless it is an
    earlier repair's marker, which saves the time of making them; their
    calls' `args` are kept as with previews.

    `format` (a FORMATS id) skips sniffing. Raises FormatError when the file
    is empty, not JSON or JSONL, not valid UTF-8 as a whole document, or of no
    supported format. A JSONL line that does not parse becomes a record with
    `error` set (reported as `malformed_record`); the rest still parses.
    JSON lines from a FileSource are streamed; a JSON document is read whole.
    """
    if format is not None and format not in FORMATS:
        raise FormatError(filename, 1, f"unknown format {format!r}")
    try:
        return _load(data, filename, format, summaries)
    except FormatError as exc:
        packing = _compressed(data[0:10]) if exc.line == 1 and not exc.format else None
        if packing is None:
            raise
        reason = (
            f"the file is a {packing} archive: extract the session from it first"
            if packing in _ARCHIVES
            else f"the file is {packing}-compressed: decompress it first"
        )
        raise FormatError(filename, 1, reason, packing=packing) from exc


# A compressed file's first bytes, none of which can start a JSON text.
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)
_ARCHIVES = ("zip", "7z")


def _compressed(head: bytes) -> str | None:
    """Return the name of the compression `head` (a file's first 10 bytes) starts, or None."""
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in _BZIP2_BLOCKS:
        return "bzip2"
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


# What follows "BZh" and the block size: a block's magic, or an empty stream's end.
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")


def _load(
    data: bytes | FileSource, filename: str, format: str | None, summaries: bool
) -> Transcript:
    """`load` once `format` is known to be None or a FORMATS id."""
    if isinstance(data, FileSource):
        if _streams(data, format):
            if summaries:
                return _load_jsonl(data, filename, format, None, summaries)
            with without_previews():  # `_settle` would drop them
                return _load_jsonl(data, filename, format, None, summaries)
        data = data[0 : len(data)]
    elif (format is None or FORMATS[format].jsonl) and _streams(data, None):
        # A JSON object followed by more lines is never one JSON document: not parsed as one.
        return _load_jsonl(data, filename, format, None)
    body = data[len(_BOM) :] if data.startswith(_BOM) else data
    # Where the content starts and ends, found without copying a large file.
    begin, end = _content_bounds(body)
    if begin == end:
        raise FormatError(filename, 1, "the file is empty")
    if body[begin : begin + 1] in (b"[", b"{") and (format is None or not FORMATS[format].jsonl):
        with _previews(summaries):
            streamed = _stream_document(data, filename, format)
        if streamed is not None:
            return streamed
    root: Any = None
    doc_error: tuple[int, int, str] | None = None
    first = body[begin : begin + 1]
    if first in (b"[", b"{"):
        try:
            root = jsontext.loads(body)
        except orjson.JSONDecodeError as exc:
            _refuse_if_out_of_memory(exc, filename, 1)
            doc_error = (exc.lineno, exc.colno, _decode_reason(exc.msg))
    elif not first:
        raise FormatError(filename, 1, "the file is empty")
    if format is not None:
        chosen = FORMATS[format]
        if not chosen.jsonl:
            if root is None:
                reason = f"{chosen.label} is one JSON document, and this file is not one"
                raise FormatError(filename, 1, reason, format)
            with _previews(summaries):
                return _load_document(data, filename, root, format)
        if root is not None and body.count(b"\n", begin, end):
            reason = f"{chosen.label} is JSON lines, and this file is one JSON document"
            raise FormatError(filename, 1, reason, format)
        return _load_jsonl(data, filename, format, doc_error)
    if root is not None:
        fmt = registry.sniff([root], filename, jsonl=False)
        if fmt is not None:
            with _previews(summaries):
                return _load_document(data, filename, root, fmt.id)
        if not (isinstance(root, dict) and body.count(b"\n", begin, end) == 0):
            refusal = stream_refusal([root])
            raise FormatError(filename, 1, refusal or _UNKNOWN_DOCUMENT, unknown=refusal is None)
        # One object on one line: one JSON document, and one line of JSON lines too.
        try:
            return _load_jsonl(data, filename, format, doc_error)
        except FormatError as exc:
            if exc.unknown and not exc.agent_file:
                raise FormatError(
                    filename, 1, _UNKNOWN_OBJECT, records=exc.records, unknown=True
                ) from exc
            raise
    return _load_jsonl(data, filename, format, doc_error)


def _previews(summaries: bool) -> AbstractContextManager[None]:
    """Return the context to classify a document's elements in: previews only with `summaries`."""
    return nullcontext() if summaries else without_previews()


_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() strips


def _content_bounds(body: bytes) -> tuple[int, int]:
    """Return (start, end) of `body` without leading and trailing ASCII whitespace."""
    begin = _SPACE.match(body).end()  # type: ignore[union-attr]
    end = len(body)
    while end > begin and body[end - 1] in b" \t\n\r\x0b\x0c":
        end -= 1
    return begin, end


def _streams(source: bytes | FileSource, format: str | None) -> bool:
    """Return True when `source` holds JSON lines (to stream) rather than one document."""
    if format is not None:
        return FORMATS[format].jsonl
    head = source[0 : 1 << 16]
    body = head[len(_BOM) :] if head.startswith(_BOM) else head
    first = body.lstrip()[:1]
    if first == b"[":
        return False
    if first != b"{":
        return bool(first)
    if b"\n" not in body.lstrip() and isinstance(source, FileSource) and len(source) > len(head):
        return _long_first_line_streams(source)
    line, newline, rest = body.lstrip().partition(b"\n")
    if not newline or not rest.strip():
        return False  # one line only: a JSON document
    try:
        return isinstance(jsontext.loads(line), dict)
    except orjson.JSONDecodeError as exc:
        _refuse_if_out_of_memory(exc, "the file", 1)
        return False


def is_document(data: bytes | FileSource, format: str | None = None) -> bool:
    """Return True when `load` reads `data` as one JSON document, not as JSON lines.

    `format` is the format chosen (None: sniffed; an unknown one, which
    `load` refuses, is no document). Reads at most the file's first 64 KiB
    (and, for a first line longer than that, where it ends).
    """
    if format is not None:
        return format in FORMATS and not FORMATS[format].jsonl
    return not _streams(data, None)


def _long_first_line_streams(source: FileSource) -> bool:
    """Return True when a file whose first line outruns the sniffed head is JSON lines.

    The first line is not read whole (it may be 100 MB: a long first prompt):
    its end is found a chunk at a time. An object's line that ends in `}`
    with another line opening with `{` after it is never one JSON document
    (valid JSON allows only `,` or a closing bracket after a value there), so
    those are JSON lines; else it is taken for a document, as before.
    """
    at = 0
    for chunk in source.chunks(0, len(source)):
        newline = chunk.find(b"\n")
        if newline >= 0:
            end = at + newline
            tail = source[max(0, end - 64) : end].rstrip(b" \t\r")
            after = source[end + 1 : end + 1 + 4096].lstrip()
            return tail.endswith(b"}") and after.startswith(b"{")
        at += len(chunk)
    return False  # one line: a JSON document


_NONE: Any = SETTLED_EMPTY  # the records that hold no calls or results share it

_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)


def _provider(fmt: Format, records: list[Record]) -> str:
    """Return the session's provider; the format's default when a record's shape is odd."""
    try:
        return fmt.provider_of(records)
    except _SHAPE_ERRORS:
        return fmt.provider


def _rewritten_ids(fmt: Format, records: list[Record], provider: str) -> frozenset[int]:
    """Return the records whose call ids the agent rewrites; none when a record's shape is odd."""
    try:
        return fmt.rewritten_ids(records, provider)
    except _SHAPE_ERRORS:
        return frozenset()


def classify_record(fmt: Format, obj: Any, record: Record, filename: str) -> None:
    """Classify one record; a record whose shape the format cannot read is malformed.

    Transcripts are untrusted: a field of an unexpected type must cost that
    record, not the whole file.
    """
    try:
        fmt.classify(obj, record)
    except _SHAPE_ERRORS as exc:
        record.role, record.kind, record.text = Role.META, "malformed", ""
        record.calls, record.results, record.other_blocks = [], [], 0
        record.uid = record.parent = record.message_id = None
        record.error = (
            f"{filename}: line {record.line}: a record of a shape {fmt.label} does not have "
            f"({type(exc).__name__})"
        )


def _message_array(text: str, start: int, keys: tuple[str, ...]) -> int:
    """Return the offset of the message array: the root itself, or its first member in `keys`.

    A format names where its documents keep the array: `messages` for request
    bodies, `input` for Responses (formats.md §3), `contents` or `history` for
    Gemini (§6).
    """
    if text[start] == "[":
        return start
    arrays = {
        key: value_start
        for key, value_start, _ in scan_object(text, start)
        if key in keys and text[value_start] == "["
    }
    if not arrays:
        names = " or ".join(f"`{key}`" for key in keys)
        raise ScanError(f"no {names} array in the object", start)
    return next(arrays[key] for key in keys if key in arrays)


def _check_shape(fmt: Format, sample: list[Any], filename: str) -> None:
    """Raise FormatError when a format the user chose plainly does not fit the file.

    Plainly: the chosen format does not recognise the first records while
    another format does.
    """
    if registry.confidence(fmt, sample, filename):
        return
    other = registry.sniff(sample, filename, jsonl=fmt.jsonl, loose=False)
    if other is not None:
        raise FormatError(
            filename,
            1,
            f"this file has the shape of {other.label}, not of {fmt.label}",
            fmt.id,
        )


def _load_document(data: bytes, filename: str, root: Any, format: str | None) -> Transcript:
    if format is not None:
        _check_shape(FORMATS[format], [root], filename)
    fmt = FORMATS[format] if format else registry.sniff([root], filename, jsonl=False)
    if fmt is None:
        raise FormatError(filename, 1, _UNKNOWN_DOCUMENT, unknown=True)
    found = array_spans(data, _skip_blank(data), root, fmt.array_keys)
    if found is not None:
        transcript = _document_records(data, filename, fmt, *found)
        transcript.server_history = fmt.continues(root)
        return transcript
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(
            filename,
            data.count(b"\n", 0, exc.start) + 1,
            f"invalid UTF-8 byte at offset {exc.start}",
            fmt.id,
        ) from None
    start = skip_ws(text, 1 if text.startswith("\ufeff") else 0)
    try:
        items, _ = scan_array(text, _message_array(text, start, fmt.array_keys))
    except ScanError as exc:
        line, col = _line_col(text, exc.pos)
        raise FormatError(filename, line, f"column {col}: {exc.reason}", fmt.id) from None
    records: list[Record] = []
    byte_pos, char_pos, line = 0, 0, 1
    for index, (start_char, end_char, obj) in enumerate(items):
        gap = text[char_pos:start_char]
        byte_pos += len(gap.encode())
        line += gap.count("\n")
        start_byte = byte_pos
        element = text[start_char:end_char]
        byte_pos += len(element.encode())
        char_pos = end_char
        records.append(_element(fmt, index, start_byte, byte_pos, obj, line, filename))
        line += element.count("\n")
    fmt.finish(records)
    server_history = fmt.continues(root)
    transcript = _transcript(fmt, records, data, filename, _document_style(data, records))
    transcript.server_history = server_history
    return transcript


def _stream_document(
    data: bytes, filename: str, format: str | None, by_lines: bool = True
) -> Transcript | None:
    """Return the Transcript of a JSON document read an element of its message array at a time.

    The Transcript `_load_document` makes of the whole parsed document, at
    the memory of one element: each is parsed, sniffed, classified and let
    go (its record re-reads it from `data` when asked). The format is
    guessed from the first elements and checked once all are read; a wrong
    guess reads them again. With `by_lines`, elements written one a line are
    taken at their lines, as orjson then confirms (else, or if it does not,
    they are found bracket by bracket). None for a document this does not
    follow (not valid JSON, a root key written twice, two candidate arrays,
    deep nesting, no format claiming it or the chosen one not fitting),
    which reading it whole then answers as ever.
    """
    begin = _skip_blank(data)
    found = _message_member(data, begin, by_lines)
    if found is None:
        return None
    key, open_, close, spans, members, lined = found
    # Every byte parsed, pieces and the rest, is the whole document parsed, whatever
    # the spans; pieces taken at their lines that do not parse may be other pieces.
    try:
        root = jsontext.loads(data[begin:open_] + b"[]" + data[close:])
    except orjson.JSONDecodeError:
        return _stream_document(data, filename, format, False) if lined else None
    if key is None and root != []:
        return None
    if key is not None and not (
        isinstance(root, dict) and len(root) == members and root.get(key) == []
    ):
        return None  # a key written twice: orjson keeps the last
    sniffing = registry.DocumentSniff(root, key, filename, keep=format)
    elements = _Elements(data, filename, spans, lined)
    fmt = FORMATS[format] if format is not None else None
    records: list[Record] = []
    held: list[Any] | None = []  # the first values, while no format is guessed (None: none was)
    view = memoryview(data)
    for index, (start, end) in enumerate(spans):
        try:
            obj = jsontext.loads(view[start:end])
        except orjson.JSONDecodeError:
            return _stream_document(data, filename, format, False) if lined else None
        sniffing.see(obj)
        if fmt is not None:
            records.append(elements.record(fmt, index, obj))
        elif held is not None:
            held.append(obj)
            if len(held) >= _GUESS_ITEMS or end - spans[0][0] >= _GUESS_BYTES:
                fmt = sniffing.surest()
                records = [elements.record(fmt, k, v) for k, v in enumerate(held)] if fmt else []
                held = None
    final = FORMATS[format] if format is not None else sniffing.surest()
    if final is None:
        return None
    if format is not None and not sniffing.confidence(final) and sniffing.surest(loose=False):
        return None  # reading it whole names the format the file has the shape of
    if isinstance(root, dict) and key != next(
        (k for k in final.array_keys if isinstance(root.get(k), list)), None
    ):
        return None
    if held:
        records = [elements.record(final, k, v) for k, v in enumerate(held)]
    elif fmt is not final:
        records = elements.reread(final, view)
    final.finish(records)
    transcript = _transcript(final, records, data, filename, _document_style(data, records))
    transcript.server_history = final.continues(root)
    return transcript


class _Elements:
    """The elements of a document's message array at their byte spans, made into records."""

    def __init__(
        self, data: bytes, filename: str, spans: list[tuple[int, int]], lined: bool
    ) -> None:
        """`lined`: each element is on a line of its own (no line break within it)."""
        self.data = data
        self.filename = filename
        self.spans = spans
        self.lines: list[int] = []
        line, pos = 1, 0
        for start, end in spans:
            line += data.count(b"\n", pos, start)
            self.lines.append(line)
            if not lined:
                line += data.count(b"\n", start, end)
            pos = end

    def record(self, fmt: Format, index: int, obj: Any) -> Record:
        """Return the record of element `index`, JSON `obj`, classified as `fmt` reads it."""
        start, end = self.spans[index]
        record = _element(fmt, index, start, end, obj, self.lines[index], self.filename)
        if record.error is None:
            record.parsed, record.source = None, self.data
        return record

    def reread(self, fmt: Format, view: memoryview) -> list[Record]:
        """Return every element's record, each parsed again (all parsed once already)."""
        return [
            self.record(fmt, index, jsontext.loads(view[start:end]))
            for index, (start, end) in enumerate(self.spans)
        ]


def _message_member(
    data: bytes, begin: int, by_lines: bool
) -> tuple[str | None, int, int, list[tuple[int, int]], int, bool] | None:
    """Find the message array of the document whose root value opens at `begin`.

    Return (its root member's key, or None for a root array; the offsets of
    its `[` and just past its `]`; its elements' spans; how many members the
    root has; whether the spans were taken at lines, see `_element_spans`),
    or None when the root is an object with no member of `_ARRAY_KEYS`
    holding an array, or more than one. Nothing is decoded but the root's
    keys: the spans hold for valid JSON, which orjson then checks.
    """
    if data[begin : begin + 1] == b"[":
        found = _element_spans(data, begin, by_lines)
        return None if found is None else (None, begin, found[1], found[0], 0, found[2])
    pos = skip_blank(data, begin + 1)
    members = 0
    array: tuple[str, int, int, list[tuple[int, int]], bool] | None = None
    if data[pos : pos + 1] == b"}":
        return None
    while True:
        key_end = value_end(data, pos, 0)
        if data[pos : pos + 1] != b'"' or key_end is None:
            return None
        try:
            key = jsontext.loads(data[pos:key_end])
        except orjson.JSONDecodeError:
            return None
        pos = skip_blank(data, key_end)
        if data[pos : pos + 1] != b":":
            return None
        pos = skip_blank(data, pos + 1)
        members += 1
        if key in _ARRAY_KEYS and data[pos : pos + 1] == b"[":
            found = _element_spans(data, pos, by_lines)
            if found is None or array is not None:
                return None
            array = (key, pos, found[1], found[0], found[2])
            end = found[1]
        else:
            value = value_end(data, pos, _DEEPEST)
            if value is None:
                return None
            end = value
        pos = skip_blank(data, end)
        separator = data[pos : pos + 1]
        if separator == b"}":
            break
        if separator != b",":
            return None
        pos = skip_blank(data, pos + 1)
    if array is None:
        return None
    key, open_, close, spans, lined = array
    return key, open_, close, spans, members, lined


def _element_spans(
    data: bytes, open_: int, by_lines: bool
) -> tuple[list[tuple[int, int]], int, bool] | None:
    """Return the spans of the elements of the array that opens at `open_`, its end, and how.

    With `by_lines`, first as lines: each element an object or array alone
    on its line but for the comma after it (True: only orjson can tell
    whether they are the elements). Else, or when the array is not written
    so, bracket by bracket (False). None when the array is not closed, or an
    element nests too deep to be read alone.
    """
    if by_lines:
        found = _line_spans(data, open_)
        if found is not None:
            return found[0], found[1], True
    spans: list[tuple[int, int]] = []
    pos = skip_blank(data, open_ + 1)
    if data[pos : pos + 1] == b"]":
        return spans, pos + 1, False
    while True:
        end = value_end(data, pos, _DEEPEST)
        if end is None:
            return None
        spans.append((pos, end))
        pos = skip_blank(data, end)
        separator = data[pos : pos + 1]
        if separator == b"]":
            return spans, pos + 1, False
        if separator != b",":
            return None
        pos = skip_blank(data, pos + 1)


_CLOSING = {ord("{"): ord("}"), ord("["): ord("]")}


def _line_spans(data: bytes, open_: int) -> tuple[list[tuple[int, int]], int] | None:
    """Return the spans of the array's elements taken one a line, and its end; None if not so.

    A JSON string holds no raw line break, so a line that opens with a
    bracket and closes with its match, a comma after it, is likely one
    element: orjson says for sure.
    """
    spans: list[tuple[int, int]] = []
    pos = skip_blank(data, open_ + 1)
    if data[pos : pos + 1] == b"]":
        return spans, pos + 1
    size = len(data)
    while True:
        closing = _CLOSING.get(data[pos]) if pos < size else None
        if closing is None:
            return None
        end = data.find(b"\n", pos)
        end = size if end < 0 else end
        while data[end - 1] in b" \t\r,":
            end -= 1
        if end <= pos or data[end - 1] != closing:
            return None
        spans.append((pos, end))
        pos = skip_blank(data, end)
        separator = data[pos : pos + 1]
        if separator == b"]":
            return spans, pos + 1
        if separator != b",":
            return None
        pos = skip_blank(data, pos + 1)


def _skip_blank(data: bytes) -> int:
    """Return the offset of a document's root value: after a BOM and whitespace."""
    pos = len(_BOM) if data.startswith(_BOM) else 0
    while data[pos : pos + 1] in (b" ", b"\t", b"\n", b"\r"):
        pos += 1
    return pos


def _document_records(
    data: bytes, filename: str, fmt: Format, values: list[Any], spans: list[tuple[int, int]]
) -> Transcript:
    """Return the Transcript of a document whose message array `values` lies at `spans`.

    Each record's JSON is the value orjson decoded: the file is decoded once.
    """
    records: list[Record] = []
    line, pos = 1, 0
    for index, ((start, end), obj) in enumerate(zip(spans, values, strict=True)):
        line += data.count(b"\n", pos, start)
        records.append(_element(fmt, index, start, end, obj, line, filename))
        line += data.count(b"\n", start, end)
        pos = end
    fmt.finish(records)
    return _transcript(fmt, records, data, filename, _document_style(data, records))


def _element(
    fmt: Format, index: int, start: int, end: int, obj: Any, line: int, filename: str
) -> Record:
    """Return the record of array element `index`: JSON `obj` at bytes `start:end`, classified.

    An element that is not an object is a record with `error` set.
    """
    record = Record(index, start, end, Role.META, "", parsed=obj, line=line)
    if isinstance(obj, dict):
        classify_record(fmt, obj, record, filename)
    else:
        record.error = f"{filename}: line {line}: element {index} is not a JSON object"
    return record


def _document_style(data: bytes, records: list[Record]) -> Style:
    """Return how a document writes its elements: the first one's JSON style, and `sep`.

    `sep` is what stands between two elements; for a one-element array, a comma
    then the break and indent before the element. The default Style for an empty array.
    """
    if not records:
        return Style()
    first = records[0]
    base_bytes = data[data.rfind(b"\n", 0, first.start) + 1 : first.start]
    base = base_bytes.decode() if not base_bytes.strip() else ""
    element = sniff_style(data[first.start : first.end].decode(), base, data.isascii())
    if len(records) > 1:
        sep = data[first.end : records[1].start]
    else:
        sep = b"," + data[first.start - len(base.encode()) - 1 : first.start]
    return Style(element=element, sep=sep)


def _refuse_if_out_of_memory(exc: orjson.JSONDecodeError, filename: str, line_no: int) -> None:
    """Raise MemoryError when orjson failed for want of memory, not on the bytes.

    orjson reports an allocation it could not make as a JSONDecodeError
    ("Not enough memory to allocate buffer for parsing"); read as a malformed
    line, a policy that drops malformed lines would drop a valid record.
    """
    if exc.msg.startswith("Not enough memory"):
        raise MemoryError(
            f"{filename}: line {line_no}: not enough memory to parse it (the line is valid "
            "or not: it was never read)"
        ) from exc


def _read_line(
    raw: bytes, index: int, start: int, end: int, line_no: int, terminated: bool, filename: str
) -> Record:
    """Return the record of one JSONL line, its JSON parsed, or `error` set."""
    record = Record(index, start, end, Role.META, "malformed", line=line_no)
    try:
        obj = jsontext.loads(raw)
    except orjson.JSONDecodeError as exc:
        _refuse_if_out_of_memory(exc, filename, line_no)
        reason = f"column {exc.colno}: {_decode_reason(exc.msg)}"
        if not terminated:
            reason = f"truncated last line ({reason})"
        record.error = f"{filename}: line {line_no}: {reason}"
    else:
        if isinstance(obj, dict):
            record.parsed = obj
        else:
            kind = _JSON_TYPES.get(type(obj), "value")
            record.error = f"{filename}: line {line_no}: a JSON {kind}, not an object"
    return record


def _load_jsonl(
    data: bytes | FileSource,
    filename: str,
    format: str | None,
    doc_error: tuple[int, int, str] | None,
    summaries: bool = True,
) -> Transcript:
    """Read JSON lines in one pass; sniff on the first lines, classify as the rest stream by.

    Each record keeps its byte span and lets its parsed JSON go once classified,
    so memory grows with the number of records, not the size of the file.
    """
    # A streamed file's records go into columns once the format is known (the first
    # lines are sniffed as Records first); a file read whole keeps its Records.
    store = None if isinstance(data, bytes) else RecordStore(data)
    records: list[Record] = []
    call_ids: dict[str, str] = {}  # the recent calls' ids, which their results share
    fmt = FORMATS[format] if format else None
    checked = False  # the first lines sniffed, or checked against the chosen format
    sniff_at = _SNIFF_LINES  # records read before the format is sniffed
    # Set once the format is known, when it reads lines straight into the store.
    store_line: Callable[[dict[str, Any], RecordStore, int, int, int], bool] | None = None
    append_line: linescan.Appender | None = None  # its C reader of the same fields, if built
    eol: bytes | None = None
    orjson_loads = orjson.loads
    take: list[Taker | None] = [None]  # set once the C appender takes whole chunks' lines
    line_no = 0

    def taken(chunk: bytes | bytearray, pos: int, offset: int) -> tuple[int, int]:
        nonlocal line_no
        assert store is not None and append_lines is not None
        pos, offset, following = append_lines(store, chunk, pos, offset, line_no + 1)
        line_no = following - 1
        return pos, offset

    append_lines: linescan.LinesAppender | None = None
    for start, end, raw, terminated in iter_lines(data, take):
        line_no += 1
        if eol is None and terminated:
            eol = b"\r\n" if data[end : end + 1] == b"\r" else b"\n"
        if line_no == 1 and raw.startswith(_BOM):
            start, raw = start + len(_BOM), raw[len(_BOM) :]
        if not (raw.startswith(b"{") or raw.strip()):
            continue  # a blank line: kept in the gap after the record before it
        if store_line is not None and store is not None:
            if append_line is not None and append_line(store, raw, start, end, line_no):
                continue
            try:
                # orjson itself first: `jsontext.loads` is it but for the lines it refuses.
                obj = orjson_loads(raw)
            except orjson.JSONDecodeError:
                try:
                    obj = jsontext.loads(raw)
                except orjson.JSONDecodeError:
                    obj = None  # read again below, for its error (or for want of memory)
            if obj.__class__ is dict:
                try:
                    if store_line(obj, store, start, end, line_no):
                        continue
                except Exception:  # not covered, or failing: classified as ever (fails so too)
                    pass
                record = Record(len(records), start, end, Role.META, "malformed", line=line_no)
                record.parsed = obj
            else:
                record = _read_line(raw, len(records), start, end, line_no, terminated, filename)
        else:
            record = _read_line(raw, len(records), start, end, line_no, terminated, filename)
        if fmt is None or not checked:
            records.append(record)
            if len(records) < sniff_at:
                continue
            if fmt is None and len(records) < _SNIFF_MOST and _sniffed(records, filename) is None:
                sniff_at = 2 * len(records)
                continue
            fmt = _settled(fmt, records, data, filename, doc_error, summaries, call_ids)
            checked = True
            records = _stored(store, records)
            if store is not None and not summaries and fmt.stores_lines:
                store_line = fmt.store_line  # what detection needs, read straight
                append_line = linescan.APPENDERS.get(fmt.id)
                append_lines = linescan.LINES_APPENDERS.get(fmt.id)
                if append_lines is not None and eol is not None:
                    take[0] = taken
        else:
            # A stored record shares its strings with the one before by itself.
            previous = records[-1] if records and store is None else None
            _settle(fmt, record, data, filename, summaries, previous, call_ids)
            records.append(record)
    if fmt is None or not checked:
        fmt = _settled(fmt, records, data, filename, doc_error, summaries, call_ids)
        records = _stored(store, records)
    if store is not None:
        store.stand_for_last(fmt.last_copy)
    fmt.finish(records)
    first_obj = next((r for r in records if r.error is None), None)
    element = None
    if first_obj is not None:
        sample = data[first_obj.start : first_obj.end]
        element = sniff_style(sample.decode("utf-8", "replace"), "", _escapes_non_ascii(sample))
    return _transcript(fmt, records, data, filename, Style(element=element, eol=eol or b"\n"))


# A `\uXXXX` escape (not an escaped backslash before a `u`) and its code point.
_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})")


def _escapes_non_ascii(sample: bytes) -> bool:
    """Return True when the record `sample` shows its writer escapes non-ASCII text.

    It does when the record is ASCII and escapes a character above U+007F
    (Python's `json.dumps` by default). A record with nothing beyond ASCII
    to escape shows nothing: new records are then written as the agents
    write theirs (JavaScript's `JSON.stringify`, Rust's serde_json), in UTF-8.
    """
    return sample.isascii() and any(
        int(match.group(1), 16) >= 0x80 for match in _ESCAPE.finditer(sample)
    )


def _stored(store: RecordStore | None, records: list[Record]) -> list[Record]:
    """Return `records` moved into `store` (the store itself), or as they are without one."""
    if store is None:
        return records
    store.extend(records)
    return store


def _transcript(
    fmt: Format,
    records: list[Record],
    data: bytes | FileSource,
    filename: str,
    style: Style,
) -> Transcript:
    """Return the Transcript of `records`, with what its format says about pairing."""
    provider = _provider(fmt, records)
    return Transcript(
        fmt.id,
        provider,
        records,
        data,
        filename=filename,
        tree=fmt.tree and fmt.reads_tree(records),
        last_copy=fmt.last_copy,
        adjacent=fmt.adjacent(provider),
        inline_results=fmt.inline_results,
        result_role=fmt.result_role,
        results_on_calls=fmt.results_on_calls,
        native_text=fmt.native_text,
        style=style,
        agent=fmt.agent,
        malformed_note=fmt.malformed_note,
        rewritten_ids=_rewritten_ids(fmt, records, provider),
    )


def _settled(
    fmt: Format | None,
    records: list[Record],
    data: bytes | FileSource,
    filename: str,
    doc_error: tuple[int, int, str] | None,
    summaries: bool = True,
    call_ids: dict[str, str] | None = None,
) -> Format:
    """Sniff (or check the chosen format on) the first records, then classify them."""
    if fmt is None:
        fmt = _sniff_lines(records, filename, doc_error)
    else:
        sample = [r.parsed for r in records[:_SNIFF_LINES] if r.parsed is not None]
        if not sample and records and fmt.jsonl:
            # No line is a JSON object: not JSON lines at all (read whole, a document written
            # over many lines is refused as one; streamed, it is refused here).
            raise FormatError(
                filename,
                1,
                f"{fmt.label} is JSON lines, and none of the first "
                f"{min(len(records), _SNIFF_LINES)} lines of this file is a JSON object "
                "(one JSON document written over many lines?)",
                fmt.id,
            )
        _check_shape(fmt, sample, filename)
    for k, record in enumerate(records):
        _settle(fmt, record, data, filename, summaries, records[k - 1] if k else None, call_ids)
    return fmt


def _sniffed(records: list[Record], filename: str) -> Format | None:
    """Return the format the first records claim (see `_sniff_lines`), or None."""
    count = _SNIFF_LINES
    while True:
        sample = [r.parsed for r in records[:count] if r.parsed is not None]
        fmt = registry.sniff(sample, filename, jsonl=True)
        if fmt is not None or count >= min(len(records), _SNIFF_MOST):
            return fmt
        count *= 2


def _sniff_lines(
    records: list[Record], filename: str, doc_error: tuple[int, int, str] | None
) -> Format:
    """Return the format of JSON lines from their first records; raise FormatError if none.

    The first _SNIFF_LINES records are sniffed, then twice as many, and so on
    up to _SNIFF_MOST, until a format claims them.
    """
    fmt = _sniffed(records, filename)
    if fmt is not None:
        return fmt
    sample = [r.parsed for r in records[:_SNIFF_LINES] if r.parsed is not None]
    refusal = stream_refusal(sample)
    if refusal is not None:
        first = next(r for r in records if r.parsed is not None)
        raise FormatError(filename, first.line, refusal, records=len(records))
    what = agent_file(sample)
    if what is not None:
        reason = f"not a session file: this is {what}, which no agent resumes"
        raise FormatError(filename, 1, reason, records=len(records), agent_file=what)
    if sample and records[0].parsed is None:
        # A first line that is no JSON at all: a text file, a log, not a session's first record.
        bad = records[0]
        reason = (bad.error or "").split(": ", 2)[-1]
        raise FormatError(
            filename,
            bad.line,
            f"not JSON ({reason}): not a session file Pairfix reads",
            records=len(records),
            unknown=True,
        )
    if sample:
        raise FormatError(
            filename,
            1,
            "unknown format: JSON lines, but not one of the formats Pairfix reads",
            records=len(records),
            unknown=True,
        )
    if doc_error is not None:
        line, col, msg = doc_error
        raise FormatError(filename, line, f"not valid JSON: column {col}: {msg}")
    if not records:
        raise FormatError(filename, 1, "the file is empty")
    bad = records[0]
    reason = (bad.error or "").split(": ", 2)[-1]
    raise FormatError(filename, bad.line, f"not JSON or JSON lines: {reason}")


def _settle(
    fmt: Format,
    record: Record,
    data: bytes | FileSource,
    filename: str,
    summaries: bool = True,
    previous: Record | None = None,
    call_ids: dict[str, str] | None = None,
) -> None:
    """Classify a parsed record, then let its JSON go: it is re-read from `data` on demand.

    `previous` is the record read just before it, whose id strings it shares;
    `call_ids` holds the ids of the calls read lately, which a result read
    without its preview shares too.
    """
    if record.parsed is not None:
        classify_record(fmt, record.parsed, record, filename)
    record.parsed = None
    if not summaries and record.role is not Role.META:
        # Previews are for showing rows; a marker is how detect knows an earlier repair.
        # (META records keep theirs: a format's `finish` may read them, as Gemini CLI's
        # rewinds do.)
        record.text = ""
        if record.calls:
            record.calls = [replace(c, args=args_digest(c.args)) for c in record.calls]
        if record.results:
            shared = call_ids or {}
            record.results = [
                r
                if synthetic_marker(r.text)
                else ToolResult(
                    shared.get(r.tool_call_id, r.tool_call_id),
                    r.record,
                    r.block,
                    r.is_error,
                    "",
                    r.family,
                )
                for r in record.results
            ]
    if call_ids is not None and record.calls:
        if len(call_ids) > _RECENT_CALLS:
            call_ids.clear()  # a call's result follows it closely; older ids are not kept
        for call in record.calls:
            call_ids[call.id] = call.id
    record.source = data
    # What a long session keeps per record is its index: no empty lists, no
    # timestamp (re-read from the source when shown).
    record.timestamp = None
    if not record.calls:
        record.calls = _NONE
    if not record.results:
        record.results = _NONE
    # A record's parent is nearly always the record before it, and split lines of one
    # response follow each other: sharing that record's strings keeps one copy of each
    # id without a table of every id (interning one costs as much as the string).
    record.kind = sys.intern(record.kind)
    if previous is not None:
        if record.parent is not None and record.parent == previous.uid:
            record.parent = previous.uid
        if record.message_id is not None and record.message_id == previous.message_id:
            record.message_id = previous.message_id
