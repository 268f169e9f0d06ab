"""Claude Code and OpenClaw lines read into a record store without building their JSON.

A streamed load without previews keeps a few fields of each line (`Format.store_line`).
Reading them off orjson's objects costs most of a load: every string of a line, its whole
output included, is made a Python object first. The C module `_linescan` checks a line's
JSON and finds those fields in place; this module turns what it finds into the rows a
store keeps. A line it does not cover (see `_linescan.c`) is left to `store_line`, so a
load gives the same records with it or without it (`tests/formats/test_linescan.py`).

The loader uses `APPENDERS` (and `LINES_APPENDERS`, a chunk's lines at once): they write
what they read into the store's columns themselves, as `store_scanned` and
`RecordStore.append_message` would, so a line costs no Python call beyond the row
functions of its calls and results. `SCANNERS` return what they read as a tuple, which
`store_scanned` stores: the reference the appenders are held to, column by column and
byte by byte.

Without a C compiler at install time the module is not built: `SCANNERS` is then empty and
every line is read with orjson.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from transcripts.core import store as columns
from transcripts.core.markers import _FIRST
from transcripts.core.model import (
    _ABORTED,
    _INTERRUPTED,
    _LINE_BITS,
    _OTHER_SHIFT,
    _SIDECHAIN,
    _SPAN_BITS,
    Role,
)
from transcripts.core.store import RecordStore
from transcripts.formats.base import (
    _ARGS_KEPT,
    _name_problem,
    call_row,
    canonical_call_row,
    result_text,
)

# A line's fields as `_linescan` returns them, or None for a line it leaves to orjson.
Scanned = tuple[Any, ...]
_ROLES = (Role.USER, Role.ASSISTANT, Role.TOOL)  # a scanner's role codes
Scanner = Callable[[bytes], Scanned | None]

# A scanner that appends the line to a store itself: (store, line, start, end, line_no) ->
# True once appended, None for a line left to orjson (nothing appended then).
Appender = Callable[[RecordStore, bytes, int, int, int], bool | None]

# The same for a chunk's whole lines from `pos`: (store, chunk, pos, offset, line_no) ->
# (pos, offset, line_no) of the first line it leaves (see `_linescan.c`).
LinesAppender = Callable[[RecordStore, bytes | bytearray, int, int, int], tuple[int, int, int]]

SCANNERS: dict[str, Scanner] = {}
APPENDERS: dict[str, Appender] = {}
LINES_APPENDERS: dict[str, LinesAppender] = {}
try:
    from transcripts.formats._linescan import (
        claude_code,
        claude_code_append,
        claude_code_lines,
        configure,
        configure_store,
        openclaw,
        openclaw_append,
        openclaw_lines,
    )
except ImportError:  # built without a C compiler: every line is read with orjson
    BUILT = False
else:
    BUILT = True
    configure(_FIRST.encode("ascii"), _SIDECHAIN, _ABORTED, _INTERRUPTED)
    configure_store(
        {
            **{
                name: getattr(columns, name)
                for name in (
                    *("_CHUNK_MASK", "_ARENA_CHUNK", "_ARENA_BITS", "_LENGTH_BITS", "_UUID"),
                    *("_WIDE", "_COUNT_BITS", "_ROWS_LIMIT", "_RECENT", "_ROLE_BITS"),
                    "_HASH_MASK",
                )
            },
            "_OTHER_SHIFT": _OTHER_SHIFT,
            "_SPAN_BITS": _SPAN_BITS,
            "_LINE_BITS": _LINE_BITS,
            **{role.value: columns._ROLE_CODE[role] for role in _ROLES},
            "roles": _ROLES,
            "call_row": call_row,
            "canonical_call_row": canonical_call_row,
            "result_text": result_text,
            "loads": orjson.loads,
            "_name_problem": _name_problem,
            "_ARGS_KEPT": _ARGS_KEPT,
        }
    )
    SCANNERS = {"claude_code": claude_code, "openclaw": openclaw}
    APPENDERS = {"claude_code": claude_code_append, "openclaw": openclaw_append}
    LINES_APPENDERS = {"claude_code": claude_code_lines, "openclaw": openclaw_lines}


def store_scanned(
    scanned: Scanned, raw: bytes, store: RecordStore, start: int, end: int, line: int
) -> None:
    """Append the record a scanner read from `raw` (bytes `start:end`, line `line`) to `store`.

    The same record `store_line` appends for the line. Raises what `call_row`,
    `orjson.loads` or `RecordStore.append_message` raise (the loader then
    reads the line as ever); nothing is appended then.
    """
    kind, role, bits, uid, parent, message_id, other, calls, results = scanned
    loads = orjson.loads
    if calls:
        calls = [
            canonical_call_row(j, call_id, name, raw[at:stop])
            if canonical
            else call_row(j, call_id, name, None if at < 0 else loads(raw[at:stop]), partial)
            for j, call_id, name, at, stop, partial, canonical in calls
        ]
    if results:
        results = [
            (
                j,
                call_id or "",
                is_error,
                "" if plain else result_text(None if at < 0 else loads(raw[at:stop])),
            )
            for j, call_id, is_error, at, stop, plain in results
        ]
    store.append_message(
        start,
        end,
        line,
        kind,
        _ROLES[role],
        (other << _OTHER_SHIFT) | bits,
        uid,
        parent,
        message_id,
        calls,
        results,
    )
