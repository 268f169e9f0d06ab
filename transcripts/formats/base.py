"""What every native format provides: record classification and new records in its shape."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from transcripts.core.model import Op, Record, Transcript


class Format:
    """A native session format. Subclasses fill in the class attributes and hooks.

    `jsonl` formats hold one record per line; the others are one JSON document
    whose message array holds the records. Tree formats link records by
    `uid_key`/`parent_key` and are written back re-linked after a repair.
    """

    id: ClassVar[str] = ""
    label: ClassVar[str] = ""
    jsonl: ClassVar[bool] = True
    tree: ClassVar[bool] = False
    uid_key: ClassVar[str] = ""
    parent_key: ClassVar[str] = ""
    provider: ClassVar[str] = "anthropic"

    def sniff(self, sample: list[Any], filename: str) -> bool:
        """Return True when `sample` (first parsed lines, or [document root]) is this format."""
        raise NotImplementedError

    def sniff_loose(self, sample: list[Any], filename: str) -> bool:
        """Return True when `sample` could be this format though no sniff was sure of it."""
        return False

    def classify(self, obj: Any, record: Record) -> None:
        """Fill `record`'s role, kind, calls, results, links and preview from `obj`."""
        raise NotImplementedError

    def provider_of(self, records: list[Record]) -> str:
        """Return the provider whose rules apply to a session of these records."""
        return self.provider

    def adjacent(self, provider: str) -> bool:
        """Return True when results must directly follow their calling message.

        The Responses API accepts an output anywhere after its call; every other
        provider wants the results in the very next message(s).
        """
        return provider != "openai_responses"

    def synthetic(self, transcript: Transcript, op: Op) -> Any:
        """Return a new record answering `op.call` with the error text `op.text`."""
        raise NotImplementedError

    def carry(self, transcript: Transcript, op: Op) -> Any:
        """Return a new record holding only the result block `op` moves out of its record."""
        raise NotImplementedError

    def strip(self, obj: Any, blocks: frozenset[int]) -> Any:
        """Return a copy of record `obj` without the content blocks numbered `blocks`."""
        raise NotImplementedError

    def new_uid(self, transcript: Transcript, op: Op) -> str:
        """Return a deterministic id for the record `op` creates."""
        raise NotImplementedError


def digest(*parts: object) -> str:
    """Return a hex sha256 of `parts`: the seed of deterministic ids for new records."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


def preview(value: Any, limit: int = 400) -> str:
    """Return a one-line preview of a text or JSON value, at most `limit` characters."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        text = " ".join(preview(item, limit) for item in value)
    elif isinstance(value, dict):
        if isinstance(value.get("text"), str):
            text = value["text"]
        elif "content" in value:
            text = preview(value["content"], limit)
        else:
            text = str(value)
    elif value is None:
        text = ""
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
