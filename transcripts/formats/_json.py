"""Scan JSON text for the exact spans of values, and write new values in a file's style."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from transcripts.core import jsontext

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# For bytes already decoded once (so known to be valid JSON): everything up to the
# next bracket that is not inside a string, and that bracket.
_TO_BRACKET = re.compile(rb'(?:[^"\[\]{}]++|"(?:[^"\\]++|\\.)*+")*+([\[\]{}])', re.S)
_BLANK = re.compile(rb"[ \t\n\r]*")
_COMMA = re.compile(rb"[ \t\n\r]*,[ \t\n\r]*")
_KEY = re.compile(rb'"(?:[^"\\]++|\\.)*+"[ \t\n\r]*:[ \t\n\r]*')
_SCALAR = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[-+0-9.eE]++|true|false|null')


class ScanError(ValueError):
    """The text is not the JSON shape expected at `pos` (a character offset)."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


def skip_ws(text: str, pos: int) -> int:
    """Return the offset of the first non-whitespace character at or after `pos`."""
    match = _WS.match(text, pos)
    assert match is not None
    return match.end()


def decode_at(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value starting exactly at `pos`; return (value, end offset)."""
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise ScanError(exc.msg, exc.pos) from None
    except RecursionError:
        raise ScanError("JSON nested too deeply to read", pos) from None


def scan_array(text: str, pos: int) -> tuple[list[tuple[int, int, Any]], int]:
    """Return ([(start, end, value)] of each element, end) for the array at `pos`."""
    if text[pos : pos + 1] != "[":
        raise ScanError("expected '['", pos)
    items: list[tuple[int, int, Any]] = []
    pos = skip_ws(text, pos + 1)
    if text[pos : pos + 1] == "]":
        return items, pos + 1
    while True:
        value, end = decode_at(text, pos)
        items.append((pos, end, value))
        pos = skip_ws(text, end)
        char = text[pos : pos + 1]
        if char == ",":
            pos = skip_ws(text, pos + 1)
        elif char == "]":
            return items, pos + 1
        else:
            raise ScanError("expected ',' or ']'", pos)


def _container_end(data: bytes, pos: int) -> int:
    """Return the offset just past the object or array opening at `pos` of valid JSON `data`."""
    depth = 0
    for match in _TO_BRACKET.finditer(data, pos):
        if match.group(1) in b"[{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return match.end()
    raise ScanError("unterminated value", pos)


_SPECIAL = re.compile(rb'["\[\]{}]')  # what a value's extent turns on: strings and brackets
_BACKSLASH = 0x5C


def _string_end(data: bytes, pos: int) -> int | None:
    """Return the offset just past the JSON string whose opening quote is at `pos`.

    The closing quote is the first not escaped, one with an even run of
    backslashes before it (found at the speed of `bytes.find`).
    """
    end = data.find(b'"', pos + 1)
    while end > 0 and data[end - 1] == _BACKSLASH:
        run = end - 1
        while data[run - 1] == _BACKSLASH:
            run -= 1
        if (end - run) % 2 == 0:
            break
        end = data.find(b'"', end + 1)
    return end + 1 if end >= 0 else None


def value_end(data: bytes, pos: int, deepest: int) -> int | None:
    """Return the offset just past the JSON value that starts at `pos`, decoding nothing.

    Only its extent is found: strings are skipped as a JSON reader skips
    them and brackets outside them counted, nothing else checked (orjson
    checks the value's bytes after). None when the value is not closed, is
    not JSON at all, or nests more than `deepest` levels.
    """
    first = data[pos : pos + 1]
    if first == b'"':
        return _string_end(data, pos)
    if first not in (b"{", b"["):
        match = _SCALAR.match(data, pos)
        return match.end() if match else None
    depth = 0
    while (found := _SPECIAL.search(data, pos)) is not None:
        pos = found.start()
        char = data[pos]
        if char == 0x22:  # '"'
            end = _string_end(data, pos)
            if end is None:
                return None
            pos = end
            continue
        pos += 1
        if char in b"[{":
            depth += 1
            if depth > deepest:
                return None
        else:
            depth -= 1
            if depth == 0:
                return pos
    return None


def skip_blank(data: bytes, pos: int) -> int:
    """Return the offset of the first byte at or after `pos` that is not JSON whitespace."""
    return _BLANK.match(data, pos).end()  # type: ignore[union-attr]


class _Spans:
    """Find the byte spans of values in JSON bytes that orjson has decoded, decoding nothing.

    A value written as orjson writes it (compact, keys in order, UTF-8 kept) is
    found by comparing its encoding with the bytes; any other is skipped
    bracket by bracket. `None` from a method: a shape it does not follow
    (a duplicate key, a scalar where an object was expected).
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.compact = True  # the file writes values as orjson does, so far

    def value_end(self, pos: int, value: Any) -> int | None:
        data = self.data
        if data[pos : pos + 1] not in (b"{", b"["):
            match = _SCALAR.match(data, pos)
            return match.end() if match else None
        if self.compact:
            try:
                dumped = orjson.dumps(value)
            except TypeError:  # integers beyond 64 bits: found bracket by bracket
                dumped = b""
            if dumped and data.startswith(dumped, pos):
                return pos + len(dumped)
            self.compact = False
        return _container_end(data, pos)

    def member(self, pos: int, root: dict[str, Any], key: str) -> int | None:
        """Return the offset of the value of `key` in the object `root` that opens at `pos`."""
        data = self.data
        pos = _BLANK.match(data, pos + 1).end()  # type: ignore[union-attr]
        found = None
        for k, (name, value) in enumerate(root.items()):
            if k:
                comma = _COMMA.match(data, pos)
                if comma is None:
                    return None
                pos = comma.end()
            match = _KEY.match(data, pos)
            if match is None:
                return None
            written = data[pos : data.rindex(b'"', pos, match.end()) + 1]
            if jsontext.loads(written) != name:
                return None  # a key written twice: orjson kept only the last
            pos = match.end()
            if name == key:
                found = pos
            end = self.value_end(pos, value)
            if end is None:
                return None
            pos = end
        if data[_BLANK.match(data, pos).end() :][:1] != b"}":  # type: ignore[union-attr]
            return None  # more members than orjson kept: a key written twice
        return found

    def elements(self, pos: int, values: Sequence[Any]) -> list[tuple[int, int]] | None:
        """Return the (start, end) of each element of the array `values` that opens at `pos`."""
        data = self.data
        pos = _BLANK.match(data, pos + 1).end()  # type: ignore[union-attr]
        spans: list[tuple[int, int]] = []
        for k, value in enumerate(values):
            if k:
                comma = _COMMA.match(data, pos)
                if comma is None:
                    return None
                pos = comma.end()
            end = self.value_end(pos, value)
            if end is None:
                return None
            spans.append((pos, end))
            pos = end
        if data[_BLANK.match(data, pos).end() :][:1] != b"]":  # type: ignore[union-attr]
            return None
        return spans


def array_spans(
    data: bytes, start: int, root: Any, keys: tuple[str, ...]
) -> tuple[list[Any], list[tuple[int, int]]] | None:
    """Return the message array of a decoded document and its elements' byte spans.

    `data` is the document (valid JSON: `root` is what orjson decoded from
    it), `start` the offset of the root value. The array is the root itself
    or the first member of `keys` that holds an array (as `scan_array` and
    the formats read it). Decodes nothing again; returns None for a
    document this cannot follow (a repeated key, a non-array root member),
    which `scan_array` then reads.
    """
    spans = _Spans(data)
    if isinstance(root, list):
        values, pos = root, start
    elif isinstance(root, dict):
        key = next((k for k in keys if isinstance(root.get(k), list)), None)
        if key is None:
            return None
        found = spans.member(start, root, key)
        if found is None:
            return None
        values, pos = root[key], found
    else:
        return None
    if data[pos : pos + 1] != b"[":
        return None
    elements = spans.elements(pos, values)
    return (values, elements) if elements is not None else None


def scan_object(text: str, pos: int) -> list[tuple[str, int, int]]:
    """Return [(key, value start, value end)] of the members of the object at `pos`."""
    if text[pos : pos + 1] != "{":
        raise ScanError("expected '{'", pos)
    members: list[tuple[str, int, int]] = []
    pos = skip_ws(text, pos + 1)
    if text[pos : pos + 1] == "}":
        return members
    while True:
        key, end = decode_at(text, pos)
        if not isinstance(key, str):
            raise ScanError("expected a key", pos)
        pos = skip_ws(text, end)
        if text[pos : pos + 1] != ":":
            raise ScanError("expected ':'", pos)
        pos = skip_ws(text, pos + 1)
        _, end = decode_at(text, pos)
        members.append((key, pos, end))
        pos = skip_ws(text, end)
        char = text[pos : pos + 1]
        if char == ",":
            pos = skip_ws(text, pos + 1)
        elif char == "}":
            return members
        else:
            raise ScanError("expected ',' or '}'", pos)


def member_span(text: str, key: str) -> tuple[int, int] | None:
    """Return the (start, end) of top-level member `key`'s value in object text, or None.

    Of a key written twice, the last: the value every reader takes (`JSON.parse`,
    orjson, Python's json), so the one a repair must change.
    """
    found = None
    for name, start, end in scan_object(text, skip_ws(text, 0)):
        if name == key:
            found = start, end
    return found


@dataclass(frozen=True, slots=True)
class Style:
    """How a file writes JSON: separators, indent (None: one line), ASCII escaping."""

    item_sep: str = ","
    key_sep: str = ":"
    indent: int | None = None
    base: str = ""  # indentation of the value's own first line, for nested pretty values
    ensure_ascii: bool = False

    def dumps(self, value: Any) -> str:
        """Serialize `value` in this style (nested lines shifted by `base`).

        A lone surrogate is written as its `\\uXXXX` escape, as the file held it.
        """
        if self.indent is None:
            return jsontext.escape_lone(
                json.dumps(
                    value, ensure_ascii=self.ensure_ascii, separators=(self.item_sep, self.key_sep)
                )
            )
        text = json.dumps(
            value,
            ensure_ascii=self.ensure_ascii,
            indent=self.indent,
            separators=(",", self.key_sep),
        )
        return jsontext.escape_lone(text).replace("\n", "\n" + self.base)


def sniff_style(sample: str, base: str = "", ascii_file: bool = False) -> Style:
    """Return the Style of `sample`, one JSON object or array written by the file's producer.

    Looks at the separators after the first key and first value, and at the
    indent of the second line when the value spans lines.
    """
    key_sep, item_sep, indent = ":", ",", None
    match = re.search(r'"(\s*):(\s*)', sample)
    if match:
        key_sep = match.group(1) + ":" + (" " if match.group(2) else "")
    match = re.search(r'[\d"el\]}](\s*),(\s*)["{\[\dtfn-]', sample)
    if match and "\n" not in match.group(2):
        item_sep = "," + match.group(2)
    if "\n" in sample:
        lines = sample.split("\n")
        second = lines[1] if len(lines) > 1 else ""
        width = len(second) - len(second.lstrip(" "))
        indent = max(1, width - len(base))
    return Style(
        item_sep=item_sep, key_sep=key_sep, indent=indent, base=base, ensure_ascii=ascii_file
    )


def ordered_like(template: dict[str, Any] | None, values: dict[str, Any]) -> dict[str, Any]:
    """Return `values` with the key order of `template` first, then the rest."""
    if not template:
        return dict(values)
    out = {key: values[key] for key in template if key in values}
    out.update((key, value) for key, value in values.items() if key not in out)
    return out
