"""Native session formats: sniff, parse into the canonical model, render back byte-faithfully.

`load` reads bytes into a Transcript; `render` writes a Transcript repaired by a
Plan, splicing every record no op touches verbatim (DESIGN.md contract 6).
Sniffing follows formats.md §9.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from transcripts.core.branch import branch_paths
from transcripts.core.layout import SPLITS, Slot, layout, sparse_layout
from transcripts.core.markers import synthetic_marker
from transcripts.core.model import Op, OpKind, Plan, RawSource, Record, Role, Transcript
from transcripts.formats._json import (
    ScanError,
    array_spans,
    member_span,
    scan_array,
    scan_object,
    skip_ws,
    sniff_style,
)
from transcripts.formats.anthropic import Anthropic
from transcripts.formats.base import Format, linked
from transcripts.formats.bedrock import Bedrock
from transcripts.formats.claude_code import ClaudeCode
from transcripts.formats.cline import Cline
from transcripts.formats.codex import Codex
from transcripts.formats.gemini import Gemini, GeminiCheckpoint
from transcripts.formats.gemini_cli import GeminiCli, GeminiCliSession
from transcripts.formats.langchain import LangChain
from transcripts.formats.openai_chat import OpenAIChat
from transcripts.formats.openai_functions import OpenAIFunctions
from transcripts.formats.openclaw import OpenClaw
from transcripts.formats.openhands import OpenHands
from transcripts.formats.responses import Responses
from transcripts.formats.source import CHUNK, FileSource, iter_lines
from transcripts.formats.streams import stream_refusal
from transcripts.formats.vercel_ai import VercelAI

__all__ = ["FORMATS", "FormatError", "Rewrite", "label", "load", "render", "rewrite"]

# Order matters: the first format whose sniff accepts the sample wins. Documents
# follow formats.md §9; legacy functions come before Chat Completions, which they
# extend, Cline before Anthropic, which it specialises, and Bedrock before
# Anthropic, whose loose sniff would take its blocks.
FORMATS: dict[str, Format] = {
    f.id: f
    for f in (
        OpenClaw(),
        Codex(),
        ClaudeCode(),
        GeminiCliSession(),
        Cline(),
        LangChain(),
        Responses(),
        OpenAIFunctions(),
        OpenAIChat(),
        VercelAI(),
        Bedrock(),
        Anthropic(),
        OpenHands(),
        Gemini(),
        GeminiCheckpoint(),
        GeminiCli(),
    )
}
_SNIFF_LINES = 50
_UNKNOWN_DOCUMENT = (
    "unknown format: a JSON document of none of the formats Pairfix reads (message arrays "
    "of OpenAI, Anthropic, Bedrock, Gemini, LangChain, Vercel AI, Responses or OpenHands, "
    "or a Gemini CLI session)"
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


class FormatError(ValueError):
    """A file Pairfix cannot read: names the file, the line and the reason.

    `format` is the format id when it was known (None when sniffing failed);
    `records` how many records were read before giving up.
    """

    def __init__(
        self, filename: str, line: int, reason: str, format: str | None = None, records: int = 0
    ) -> None:
        super().__init__(f"{filename}: line {line}: {reason}")
        self.filename = filename
        self.line = line
        self.reason = reason
        self.format = format
        self.records = records


def label(format_id: str) -> str:
    """Return the human name of a format id ("unknown" for anything else)."""
    fmt = FORMATS.get(format_id)
    return fmt.label if fmt is not None else "Unknown format"


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
    (`Record.text`, and `ToolResult.text` but for an earlier repair's marker):
    what detecting and repairing need, not what showing rows needs, so a long
    session costs less memory per record.

    `format` (a FORMATS id) skips sniffing. Raises FormatError when the file
    is empty, not JSON or JSONL, not valid UTF-8 as a whole document, or of no
    supported format. A JSONL line that does not parse becomes a record with
    `error` set (reported as `malformed_record`); the rest still parses.
    JSON lines from a FileSource are streamed; a JSON document is read whole.
    """
    if format is not None and format not in FORMATS:
        raise FormatError(filename, 1, f"unknown format {format!r}")
    if isinstance(data, FileSource):
        if _streams(data, format):
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
    root: Any = None
    doc_error: tuple[int, int, str] | None = None
    first = body[begin : begin + 1]
    if first in (b"[", b"{"):
        try:
            root = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            doc_error = (exc.lineno, exc.colno, _decode_reason(exc.msg))
    elif not first:
        raise FormatError(filename, 1, "the file is empty")
    if format is not None:
        chosen = FORMATS[format]
        if not chosen.jsonl:
            if root is None:
                reason = f"{chosen.label} is one JSON document, and this file is not one"
                raise FormatError(filename, 1, reason, format)
            return _load_document(data, filename, root, format)
        if root is not None and body.count(b"\n", begin, end):
            reason = f"{chosen.label} is JSON lines, and this file is one JSON document"
            raise FormatError(filename, 1, reason, format)
        return _load_jsonl(data, filename, format, doc_error)
    if root is not None:
        fmt = _sniff([root], filename, documents=True)
        if fmt is not None:
            return _load_document(data, filename, root, fmt.id)
        if not (isinstance(root, dict) and body.count(b"\n", begin, end) == 0):
            raise FormatError(filename, 1, stream_refusal([root]) or _UNKNOWN_DOCUMENT)
    return _load_jsonl(data, filename, format, doc_error)


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
    line, newline, rest = body.lstrip().partition(b"\n")
    if not newline or not rest.strip():
        return False  # one line only: a JSON document
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


class _Empty(list[Any]):
    """One shared, unchangeable empty list for the records that hold no calls or results."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a settled record's calls and results do not change")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = _refuse  # type: ignore[assignment]


_NONE: Any = _Empty()

_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)


def _provider(fmt: Format, records: list[Record]) -> str:
    """Return the session's provider; the format's default when a record's shape is odd."""
    try:
        return fmt.provider_of(records)
    except _SHAPE_ERRORS:
        return fmt.provider


def _classify(fmt: Format, obj: Any, record: Record, filename: str) -> None:
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


def _sniff(sample: list[Any], filename: str, documents: bool) -> Format | None:
    candidates = [fmt for fmt in FORMATS.values() if fmt.jsonl != documents]
    for fmt in candidates:
        if fmt.sniff(sample, filename):
            return fmt
    for fmt in candidates:
        if fmt.sniff_loose(sample, filename):
            return fmt
    return None


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
    if fmt.sniff(sample, filename) or fmt.sniff_loose(sample, filename):
        return
    other = next(
        (f for f in FORMATS.values() if f.jsonl == fmt.jsonl and f.sniff(sample, filename)), None
    )
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
    fmt = FORMATS[format] if format else _sniff([root], filename, documents=True)
    if fmt is None:
        raise FormatError(
            filename,
            1,
            _UNKNOWN_DOCUMENT,
        )
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
        record = Record(index, start_byte, byte_pos, Role.META, "", parsed=obj, line=line)
        line += element.count("\n")
        if isinstance(obj, dict):
            _classify(fmt, obj, record, filename)
        else:
            record.error = f"{filename}: line {record.line}: element {index} is not a JSON object"
        records.append(record)
    fmt.finish(records)
    server_history = fmt.continues(root)
    style: dict[str, Any] = {}
    if items:
        first_start = items[0][0]
        base = text[text.rfind("\n", 0, first_start) + 1 : first_start]
        base = base if not base.strip() else ""
        style["element"] = sniff_style(text[items[0][0] : items[0][1]], base, data.isascii())
        if len(items) > 1:
            style["sep"] = data[records[0].end : records[1].start]
        else:
            style["sep"] = b"," + data[records[0].start - len(base.encode()) - 1 : records[0].start]
    transcript = _transcript(fmt, records, data, filename, style)
    transcript.server_history = server_history
    return transcript


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
        record = Record(index, start, end, Role.META, "", parsed=obj, line=line)
        line += data.count(b"\n", start, end)
        pos = end
        if isinstance(obj, dict):
            _classify(fmt, obj, record, filename)
        else:
            record.error = f"{filename}: line {record.line}: element {index} is not a JSON object"
        records.append(record)
    fmt.finish(records)
    style: dict[str, Any] = {}
    if records:
        first = records[0]
        base_bytes = data[data.rfind(b"\n", 0, first.start) + 1 : first.start]
        base = base_bytes.decode() if not base_bytes.strip() else ""
        element = data[first.start : first.end].decode()
        style["element"] = sniff_style(element, base, data.isascii())
        if len(records) > 1:
            style["sep"] = data[first.end : records[1].start]
        else:
            style["sep"] = b"," + data[first.start - len(base.encode()) - 1 : first.start]
    return _transcript(fmt, records, data, filename, style)


def _read_line(
    raw: bytes, index: int, start: int, end: int, line_no: int, terminated: bool, filename: str
) -> Record:
    """Return the record of one JSONL line, its JSON parsed, or `error` set."""
    record = Record(index, start, end, Role.META, "malformed", line=line_no)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
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
    records: list[Record] = []
    fmt = FORMATS[format] if format else None
    checked = False  # the first lines sniffed, or checked against the chosen format
    eol: bytes | None = None
    lines = iter_lines(data)
    for line_no, (start, end, raw, terminated) in enumerate(lines, 1):
        if eol is None and terminated:
            eol = b"\r\n" if data[end : end + 1] == b"\r" else b"\n"
        if line_no == 1 and raw.startswith(_BOM):
            start, raw = start + len(_BOM), raw[len(_BOM) :]
        if not (raw[:1] == b"{" or raw.strip()):
            continue  # a blank line: kept in the gap after the record before it
        record = _read_line(raw, len(records), start, end, line_no, terminated, filename)
        records.append(record)
        if fmt is None or not checked:
            if len(records) < _SNIFF_LINES:
                continue
            fmt = _settled(fmt, records, data, filename, doc_error, summaries)
            checked = True
        else:
            _settle(fmt, record, data, filename, summaries)
    if fmt is None or not checked:
        fmt = _settled(fmt, records, data, filename, doc_error, summaries)
    fmt.finish(records)
    style: dict[str, Any] = {"eol": eol or b"\n"}
    first_obj = next((r for r in records if r.error is None), None)
    if first_obj is not None:
        sample = data[first_obj.start : first_obj.end]
        style["element"] = sniff_style(sample.decode("utf-8", "replace"), "", sample.isascii())
    return _transcript(fmt, records, data, filename, style)


def _transcript(
    fmt: Format,
    records: list[Record],
    data: bytes | FileSource,
    filename: str,
    style: dict[str, Any],
) -> Transcript:
    """Return the Transcript of `records`, with what its format says about pairing."""
    provider = _provider(fmt, records)
    return Transcript(
        fmt.id,
        provider,
        records,
        data,
        filename=filename,
        tree=fmt.tree and linked(records),
        adjacent=fmt.adjacent(provider),
        inline_results=fmt.inline_results,
        results_on_calls=fmt.results_on_calls,
        native_text=fmt.native_text,
        style=style,
        agent=fmt.agent,
        malformed_note=fmt.malformed_note,
    )


def _settled(
    fmt: Format | None,
    records: list[Record],
    data: bytes | FileSource,
    filename: str,
    doc_error: tuple[int, int, str] | None,
    summaries: bool = True,
) -> Format:
    """Sniff (or check the chosen format on) the first records, then classify them."""
    if fmt is None:
        fmt = _sniff_lines(records, filename, doc_error)
    else:
        sample = [r.parsed for r in records[:_SNIFF_LINES] if r.parsed is not None]
        _check_shape(fmt, sample, filename)
    for record in records:
        _settle(fmt, record, data, filename, summaries)
    return fmt


def _sniff_lines(
    records: list[Record], filename: str, doc_error: tuple[int, int, str] | None
) -> Format:
    """Return the format of JSON lines from their first records; raise FormatError if none."""
    sample = [r.parsed for r in records[:_SNIFF_LINES] if r.parsed is not None]
    fmt = _sniff(sample, filename, documents=False)
    if fmt is not None:
        return fmt
    refusal = stream_refusal(sample)
    if refusal is not None:
        first = next(r for r in records if r.parsed is not None)
        raise FormatError(filename, first.line, refusal, records=len(records))
    if sample:
        raise FormatError(
            filename,
            1,
            "unknown format: JSON lines, but not one of the formats Pairfix reads",
            records=len(records),
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
    fmt: Format, record: Record, data: bytes | FileSource, filename: str, summaries: bool = True
) -> None:
    """Classify a parsed record, then let its JSON go: it is re-read from `data` on demand."""
    if record.parsed is not None:
        _classify(fmt, record.parsed, record, filename)
    record.parsed = None
    if not summaries and record.role is not Role.META:
        # Previews are for showing rows; a marker is how detect knows an earlier repair.
        # (META records keep theirs: a format's `finish` may read them, as Gemini CLI's
        # rewinds do.)
        record.text = ""
        if record.results:
            record.results = [
                r if synthetic_marker(r.text) else dataclasses.replace(r, text="")
                for r in record.results
            ]
    record.source = data
    # What a long session keeps per record is its index: no empty lists, no
    # timestamp (re-read from the source when shown).
    record.timestamp = None
    if not record.calls:
        record.calls = _NONE
    if not record.results:
        record.results = _NONE
    # A record's id is its child's parent, and split lines share a message id and
    # kind: one string each, not one per mention, keeps a long session small.
    record.kind = sys.intern(record.kind)
    if record.uid is not None:
        record.uid = sys.intern(record.uid)
    if record.parent is not None:
        record.parent = sys.intern(record.parent)
    if record.message_id is not None:
        record.message_id = sys.intern(record.message_id)


def _relink(
    transcript: Transcript, fmt: Format, at: dict[int, list[Slot]]
) -> dict[int | Slot, str]:
    """Return new parent ids for records whose predecessor on a branch changed.

    `at` is the sparse layout (records it lacks are written as they were).
    Keys are raw record indexes, or the Slot of a new record.
    """
    parents: dict[int | Slot, str] = {}
    for path in branch_paths(transcript):
        parents.update(_relink_path(transcript, fmt, at, path))
    return parents


def _relink_path(
    transcript: Transcript, fmt: Format, at: dict[int, list[Slot]], path: list[int]
) -> dict[int | Slot, str]:
    records = transcript.records
    parents: dict[int | Slot, str] = {}
    previous: int | None = None  # raw index of the record written just before, if any
    previous_uid: str | None = None
    for k, index in enumerate(path):
        before = path[k - 1] if k else None
        placed: Sequence[Slot | None] = at.get(index) or (None,)
        for slot in placed:
            if slot is not None and not slot.written:
                continue
            if previous_uid is not None:
                if slot is not None and slot.record is None:
                    parents[slot] = previous_uid
                else:
                    moved = slot is not None and slot.moved_in
                    own = index if slot is None or slot.record is None else slot.record
                    record = records[own]
                    unchanged = not moved and (record.boundary or before == previous)
                    # A link the reader mended is written out as mended (pi's own walk
                    # would stop at the id the record was written with).
                    written_parent = record.relinked_from or record.parent
                    if not unchanged and written_parent != previous_uid:
                        parents[own] = previous_uid
            if slot is None or slot.record is not None:
                written = index if slot is None or slot.record is None else slot.record
                previous, previous_uid = written, records[written].uid or ""
            else:
                previous = None
                previous_uid = fmt.new_uid(transcript, slot.op) if slot.op else ""
    return parents


def _rekeep(transcript: Transcript, fmt: Format, at: dict[int, list[Slot]]) -> dict[int, str]:
    """Return new first-kept ids for compactions whose first kept record the repair drops.

    pi keeps nothing before a compaction whose `firstKeptEntryId` it cannot
    find, so the compaction is pointed at the next record written on its path.
    Keys are raw record indexes of compactions.
    """
    records = transcript.records
    keeps: dict[int, str] = {}
    if not fmt.keep_key:
        return keeps
    for path in branch_paths(transcript):
        for kc, compaction in enumerate(path):
            keep = records[compaction].keep_from
            first = next((k for k in range(kc) if keep and records[path[k]].uid == keep), None)
            if first is None:
                continue
            for index in path[first:kc]:
                uid = _first_written_uid(transcript, fmt, index, at.get(index) or (None,))
                if uid is not None:
                    if uid != keep:
                        keeps[compaction] = uid
                    break
    return keeps


def _first_written_uid(
    transcript: Transcript, fmt: Format, index: int, placed: Sequence[Slot | None]
) -> str | None:
    """Return the uid of the first record written at `index`'s place (None: none is)."""
    for slot in placed:
        if slot is None:
            return transcript.records[index].uid
        if slot.written and slot.record is not None:
            return transcript.records[slot.record].uid
        if slot.written and slot.op is not None:
            return fmt.new_uid(transcript, slot.op)
    return None


def _with_keep(text: str, fmt: Format, keep: str) -> str:
    """Return a record's JSON text with its `fmt.keep_key` member set to `keep`."""
    span = member_span(text, fmt.keep_key)
    if span is None:
        return json.dumps(dict(json.loads(text), **{fmt.keep_key: keep}))
    return text[: span[0]] + json.dumps(keep) + text[span[1] :]


def _new_record(transcript: Transcript, fmt: Format, slot: Slot) -> Any:
    assert slot.op is not None
    if slot.op.kind in SPLITS:
        return fmt.split(transcript, slot.op)
    if slot.op.record is None:
        if len(slot.ops) > 1:
            return fmt.synthetic_group(transcript, slot.ops)
        return fmt.synthetic(transcript, slot.op)
    return fmt.carry(transcript, slot.op)


def _encode(transcript: Transcript, obj: Any) -> bytes:
    return str(transcript.style["element"].dumps(obj)).encode()


def _slot_value(
    transcript: Transcript, fmt: Format, slot: Slot, parents: dict[int | Slot, str]
) -> Any:
    """Return the JSON value of a new record, or of one written with other blocks.

    None for a record whose own bytes are written (with a new parent link, if any).
    """
    if slot.record is None:
        obj = _new_record(transcript, fmt, slot)
        if slot in parents:
            obj[fmt.parent_key] = parents[slot]
        return obj
    record = transcript.records[slot.record]
    if slot.block_order is None:
        if slot.record not in transcript.style.get("renamed", ()):
            return None
        obj = dict(record.obj)
        if slot.record in parents:
            obj[fmt.parent_key] = parents[slot.record]
        return obj
    placed = tuple((op.at, fmt.inline_result(transcript, op)) for op in slot.inserted)
    obj = fmt.keep(record.obj, list(slot.block_order), placed)
    new_parent = parents.get(slot.record)
    if new_parent is not None:
        obj[fmt.parent_key] = new_parent
    return obj


def _record_bytes(
    transcript: Transcript,
    fmt: Format,
    slot: Slot,
    parents: dict[int | Slot, str],
    keeps: dict[int, str] | None = None,
) -> bytes:
    obj = _slot_value(transcript, fmt, slot, parents)
    if obj is not None:
        return _encode(transcript, obj)
    assert slot.record is not None
    record = transcript.records[slot.record]
    raw = transcript.raw[record.start : record.end]
    keep = (keeps or {}).get(slot.record)
    if keep is not None:
        raw = _with_keep(raw.decode("utf-8"), fmt, keep).encode()
    new_parent = parents.get(slot.record)
    if new_parent is not None:
        text = raw.decode("utf-8")
        span = member_span(text, fmt.parent_key)
        if span is None:
            return _encode(transcript, dict(json.loads(text), **{fmt.parent_key: new_parent}))
        return (text[: span[0]] + json.dumps(new_parent) + text[span[1] :]).encode()
    return raw


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What repairing a transcript changes, as reading the repaired file would see it.

    `record_count` is how many records the repaired file holds; `replaced` the
    raw indexes of the records it drops or writes with other blocks; `records`
    the records it writes new or with other blocks, each classified from the
    very value `render` encodes for it (`index` -1 for a new record); `placed`
    the insert and move ops whose result the repaired file holds.
    """

    record_count: int
    replaced: frozenset[int]
    records: tuple[Record, ...]
    placed: frozenset[Op]


def _renamed(transcript: Transcript, fmt: Format, plan: Plan) -> Transcript:
    """Return `transcript` with the tool call ids the plan's `rename_id` ops give.

    The renamed records hold their new JSON value (the raw one is untouched),
    and `style["renamed"]` names them, so that they are written anew.
    """
    renames: dict[int, list[tuple[int, str]]] = {}
    for op in plan.ops:
        if op.kind is OpKind.RENAME_ID and op.record is not None:
            renames.setdefault(op.record, []).append((op.block or 0, op.text))
    if not renames:
        return transcript
    records = list(transcript.records)
    for index, items in renames.items():
        obj = copy.deepcopy(records[index].obj)
        for block, new_id in items:
            fmt.rename_id(obj, block, new_id)
        records[index] = dataclasses.replace(records[index], parsed=obj, source=None)
    style = {**transcript.style, "renamed": frozenset(renames)}
    return dataclasses.replace(transcript, records=records, style=style)


def rewrite(transcript: Transcript, plan: Plan) -> Rewrite:
    """Return what repairing `transcript` by `plan` changes, without rendering or reading the file.

    Costs the records the plan touches, not the whole file. A record moved
    whole, or re-linked to a new parent, keeps its blocks: it is neither
    replaced nor listed.
    """
    fmt = FORMATS[transcript.format]
    transcript = _renamed(transcript, fmt, plan)
    at = sparse_layout(transcript, plan)
    parents = _relink(transcript, fmt, at) if transcript.tree else {}
    count = len(transcript.records)
    replaced: set[int] = set()
    records: list[Record] = []
    placed: set[Op] = set()
    for index, slots in at.items():
        count += sum(slot.written for slot in slots) - 1
        for slot in slots:
            if slot.record == index and (slot.dropped or slot.block_order is not None):
                replaced.add(index)
            if not slot.written:
                continue
            # A record's own slot lists the ops that take blocks out of it too.
            if slot.record is None or slot.moved_in:
                placed.update(slot.ops)
            placed.update(slot.inserted)
            obj = _slot_value(transcript, fmt, slot, parents)
            if obj is None:
                continue
            record = Record(-1 if slot.record is None else slot.record, 0, 0, Role.META, "")
            if isinstance(obj, dict):
                _classify(fmt, obj, record, transcript.filename)
            else:
                record.error = f"{transcript.filename}: a record that is not a JSON object"
            records.append(record)
    return Rewrite(count, frozenset(replaced), tuple(records), frozenset(placed))


def render(transcript: Transcript, plan: Plan) -> bytes:
    """Return the bytes of `transcript` repaired by `plan` (see `render_to`)."""
    if not plan and isinstance(transcript.raw, bytes):
        return transcript.raw
    out = io.BytesIO()
    render_to(transcript, plan, out)
    return out.getvalue()


def render_to(transcript: Transcript, plan: Plan, out: BinaryIO) -> None:
    """Write `transcript` repaired by `plan` to `out`, in the file's own format.

    Untouched records are copied byte for byte, with their separators, line
    ends and the file's final newline (or lack of one), straight from the raw
    source in large runs; new and changed records follow the file's style. An
    empty plan writes the raw bytes.
    """
    writer = _Writer(transcript.raw, out)
    if not plan or not transcript.records:
        writer.raw(0, len(transcript.raw))
        writer.flush()
        return
    fmt = FORMATS[transcript.format]
    transcript = _renamed(transcript, fmt, plan)
    at = sparse_layout(transcript, plan)
    parents = _relink(transcript, fmt, at) if transcript.tree else {}
    keeps = _rekeep(transcript, fmt, at) if transcript.tree else {}
    if fmt.jsonl:
        _write_lines(transcript, fmt, at, parents, writer, keeps)
    else:
        slots = [slot for slot in layout(transcript, plan) if slot.written]
        _write_elements(transcript, fmt, slots, parents, keeps, writer)
    writer.flush()


class _Writer:
    """Write to `out`, copying runs of untouched raw bytes from the source in one go."""

    def __init__(self, data: bytes | RawSource, out: BinaryIO) -> None:
        self.data = data
        self.out = out
        self.run: tuple[int, int] | None = None

    def raw(self, start: int, stop: int) -> None:
        """Queue the raw bytes from `start` to `stop`, joining a run that ends at `start`."""
        if self.run is not None and self.run[1] == start:
            self.run = (self.run[0], stop)
            return
        self.flush()
        self.run = (start, stop)

    def bytes(self, data: bytes) -> None:
        """Write new bytes after whatever raw run is queued."""
        self.flush()
        self.out.write(data)

    def flush(self) -> None:
        """Write the queued raw run."""
        if self.run is None:
            return
        start, stop = self.run
        self.run = None
        if isinstance(self.data, bytes):
            self.out.write(memoryview(self.data)[start:stop])
            return
        for offset in range(start, stop, CHUNK):
            self.out.write(self.data[offset : min(stop, offset + CHUNK)])


def _own(slot: Slot) -> int | None:
    """Return the raw index of a record written at its own place, else None."""
    return slot.record if not slot.moved_in else None


def _write_lines(
    transcript: Transcript,
    fmt: Format,
    at: dict[int, list[Slot]],
    parents: dict[int | Slot, str],
    writer: _Writer,
    keeps: dict[int, str],
) -> None:
    """Write JSONL records, each followed by its own line end (and any blank lines after it).

    Records the sparse layout `at` lacks, and whose parent stays, are copied
    as they were; the file's final newline, or lack of one, is kept.
    """
    data, records = transcript.raw, transcript.records
    eol: bytes = transcript.style["eol"]
    last = _last_written(at, len(records))
    # A cut last line that the repair drops takes the open end with it: the agent's
    # next line must start on a line of its own.
    cut = records[-1].error is not None and any(s.dropped for s in at.get(len(records) - 1, ()))
    ends_open = not data.endswith(b"\n") and not cut
    writer.raw(0, records[0].start)
    for i, record in enumerate(records):
        here: Sequence[Slot | None] = at.get(i) or (None,)
        for slot in here:
            if slot is not None and not slot.written:
                continue
            own = i if slot is None else _own(slot)
            if slot is None and i not in parents and i not in keeps:
                writer.raw(record.start, record.end)
            else:
                writer.bytes(_record_bytes(transcript, fmt, slot or Slot(i), parents, keeps))
            if ends_open and (i, slot) == last:
                continue  # the file had no final newline; neither has its repair
            if own is not None:
                following = records[own + 1].start if own + 1 < len(records) else len(data)
                if following > records[own].end:
                    writer.raw(records[own].end, following)
                    continue
            writer.bytes(eol)


def _last_written(at: dict[int, list[Slot]], count: int) -> tuple[int, Slot | None] | None:
    """Return (record index, slot or None for an untouched record) of the last item written."""
    for i in range(count - 1, -1, -1):
        items = at.get(i)
        if items is None:
            return (i, None)
        written = [slot for slot in items if slot.written]
        if written:
            return (i, written[-1])
    return None


def _write_elements(
    transcript: Transcript,
    fmt: Format,
    slots: list[Slot],
    parents: dict[int | Slot, str],
    keeps: dict[int, str],
    writer: _Writer,
) -> None:
    """Write array elements, keeping the original separator between neighbours that stay.

    Untouched elements and separators are copied from the raw source in runs.
    """
    records = transcript.records
    sep: bytes = transcript.style["sep"]
    writer.raw(0, records[0].start)
    previous: int | None = None
    for k, slot in enumerate(slots):
        own = _own(slot)
        if k:
            if own is not None and previous is not None and own == previous + 1:
                writer.raw(records[previous].end, records[own].start)
            else:
                writer.bytes(sep)
        renamed = own is not None and own in transcript.style.get("renamed", ())
        if (
            own is not None
            and slot.block_order is None
            and own not in parents
            and own not in keeps
            and not renamed
        ):
            writer.raw(records[own].start, records[own].end)
        else:
            writer.bytes(_record_bytes(transcript, fmt, slot, parents, keeps))
        previous = own
    writer.raw(records[-1].end, len(transcript.raw))
