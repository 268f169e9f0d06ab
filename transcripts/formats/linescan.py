"""Claude Code and OpenClaw lines read into a record store without building their JSON.

A streamed load without previews keeps a few fields of each line (`Format.store_line`).
Reading them off orjson's objects costs most of a load: every string of a line, its whole
output included, is made a Python object first. The C module `_linescan` checks a line's
JSON and finds those fields in place; this module turns what it finds into the rows a
store keeps. A line it does not cover (see `_linescan.c`) is left to `store_line`, so a
load gives the same records with it or without it (`tests/formats/test_linescan.py`).

Without a C compiler at install time the module is not built: `SCANNERS` is then empty and
every line is read with orjson.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from transcripts.core.markers import _FIRST
from transcripts.core.model import _ABORTED, _INTERRUPTED, _OTHER_SHIFT, _SIDECHAIN, Role
from transcripts.core.store import RecordStore
from transcripts.formats.base import call_row, canonical_call_row, result_text

# A line's fields as `_linescan` returns them, or None for a line it leaves to orjson.
Scanned = tuple[Any, ...]
Scanner = Callable[[bytes], Scanned | None]

SCANNERS: dict[str, Scanner] = {}
try:
    from transcripts.formats._linescan import claude_code, configure, openclaw
except ImportError:  # built without a C compiler: every line is read with orjson
    BUILT = False
else:
    BUILT = True
    configure(_FIRST.encode("ascii"), _SIDECHAIN, _ABORTED, _INTERRUPTED)
    SCANNERS = {"claude_code": claude_code, "openclaw": openclaw}

_ROLES = (Role.USER, Role.ASSISTANT, Role.TOOL)


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
