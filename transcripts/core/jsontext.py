"""Parse JSON as the agents do: orjson, and the stdlib where only a lone surrogate stops it.

Node's string slicing can cut a surrogate pair, and `JSON.stringify` writes
the half it keeps as an escape such as `\\ud83d`. Node's `JSON.parse`
(ECMA-262) and Python's `json` read that escape as a lone surrogate code
point; orjson refuses it. Claude Code, pi and Gemini CLI are Node programs,
so such a line is one they read: Pairfix reads it too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

# A `\uD800`-`\uDFFF` escape; a preceding backslash that escapes this one is not told
# apart (the stdlib then refuses the bytes as orjson did, and orjson's error stands).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")
_LONE = re.compile("[\ud800-\udfff]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _float(text: str) -> float:
    """Read a JSON number as orjson does: refused when it is infinite as a double."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number is infinity when parsed as double: {text[:40]}")
    return value


def _int(text: str) -> int | float:
    """Read a JSON integer as orjson does: a float beyond 64 bits."""
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 64 else _float(text)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Return the JSON value of `data`, as orjson reads it, or as Node does if orjson refuses.

    orjson reads everything it can; only when it refuses `data` and `data`
    holds a surrogate escape is it read again by the stdlib (strict UTF-8,
    NaN, Infinity and numbers infinite as a double refused, integers beyond
    64 bits read as floats: as orjson reads them). Strings then may hold
    lone surrogates (see `escape_lone`). Raises orjson.JSONDecodeError, with
    orjson's own message, when neither reads it.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        if exc.msg.startswith("Not enough memory") or not _SURROGATE_ESCAPE.search(raw):
            raise
        try:
            return json.loads(
                raw.decode("utf-8"),
                parse_constant=_refuse_constant,
                parse_float=_float,
                parse_int=_int,
            )
        except (ValueError, RecursionError):
            raise exc from None


def has_lone(text: str) -> bool:
    """Return True when `text` holds a surrogate code point (which UTF-8 cannot encode)."""
    if text.isascii():  # a flag of the string: no scan
        return False
    # Strict UTF-8 refuses surrogates and nothing else; it runs faster than the pattern.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def escape_lone(text: str) -> str:
    """Return JSON text `text` with each lone surrogate written as its `\\uXXXX` escape.

    `text` is what `json.dumps(..., ensure_ascii=False)` wrote: a string
    value holding a lone surrogate has it raw, which no UTF-8 file can hold;
    the escape is what `JSON.stringify` writes for it (ECMA-262, QuoteJSONString;
    well-formed JSON.stringify) and what the file held.
    """
    if not has_lone(text):
        return text
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps_compact(value: Any) -> bytes:
    """Return `value` as orjson writes it; lone surrogates as escapes, UTF-8 kept otherwise."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return escape_lone(text).encode()
