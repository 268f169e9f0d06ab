"""Columns for text that comes from transcripts: every database stores what they hold.

Transcripts carry text no database column takes as it is. PostgreSQL's text
and jsonb refuse NUL (JSON `\\u0000`, as agents write binary tool output),
and no UTF-8 column holds a lone surrogate (a file name that is not UTF-8,
read with Python's `surrogateescape`). Such characters are spelled out as
JSON spells them: NUL as the six characters `\\u0000`, a lone surrogate as
`\\udcff`. This is for the columns people read and search (tool call ids in
the audit, errors, search text, diffs); it is not reversible, and needs not
be: the bytes themselves live unchanged in blobs (each revision's content,
and the audit's `removed_bytes`). A search query goes through the same
spelling, so it finds what it would have found in the raw text.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """Return `text` with NUL and lone surrogates spelled as JSON escapes (`\\u0000`)."""
    if "\x00" not in text and (text.isascii() or not _UNSTORABLE.search(text)):
        return text
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def storable(value: Any) -> Any:
    """Return the JSON-ready `value` with `storable_text` applied to every string in it."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


class StorableTextField(models.TextField):  # type: ignore[type-arg]
    """A TextField of any length whose values are stored as `storable_text` makes them."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return storable_text(value) if isinstance(value, str) else value


class StorableJSONField(models.JSONField):
    """A JSONField whose strings (keys and values) are stored as `storable_text` makes them."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(storable(value))
