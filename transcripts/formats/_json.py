"""Scan JSON text for the exact spans of values, and write new values in a file's style."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


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
    """Return the (start, end) of top-level member `key`'s value in object text, or None."""
    for name, start, end in scan_object(text, skip_ws(text, 0)):
        if name == key:
            return start, end
    return None


@dataclass(frozen=True, slots=True)
class Style:
    """How a file writes JSON: separators, indent (None: one line), ASCII escaping."""

    item_sep: str = ","
    key_sep: str = ":"
    indent: int | None = None
    base: str = ""  # indentation of the value's own first line, for nested pretty values
    ensure_ascii: bool = False

    def dumps(self, value: Any) -> str:
        """Serialize `value` in this style (nested lines shifted by `base`)."""
        if self.indent is None:
            return json.dumps(
                value, ensure_ascii=self.ensure_ascii, separators=(self.item_sep, self.key_sep)
            )
        text = json.dumps(
            value,
            ensure_ascii=self.ensure_ascii,
            indent=self.indent,
            separators=(",", self.key_sep),
        )
        return text.replace("\n", "\n" + self.base)


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
