"""The sniff of a document told its messages one at a time says what sniffing it whole says.

`registry.DocumentSniff` drops the tests of formats that can no longer win;
the oracle is `registry.sniff` and `registry.confidence` of the whole root.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcripts.formats import registry
from transcripts.formats.registry import FORMATS

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/samples")
ARRAYS = ("messages", "contents", "history", "input")
DOCUMENT_FORMATS = [fmt for fmt in FORMATS.values() if not fmt.jsonl]


def _roots() -> list[tuple[str, Any]]:
    found = []
    for base in (ROOT / "demo" / "samples", ROOT / "tests", SHARED):
        for path in sorted(base.rglob("*.json")):
            if path.name.endswith((".expect.json", ".faults.json")):
                continue
            try:
                found.append((path.name, orjson.loads(path.read_bytes())))
            except orjson.JSONDecodeError:
                continue
    return found


ROOTS = _roots()


def _get(root: Any, key: str) -> Any:
    return root.get(key) if isinstance(root, dict) else None


def _array(root: Any) -> tuple[str | None, list[Any]] | None:
    if isinstance(root, list):
        return None, root
    for key in ARRAYS:
        if isinstance(_get(root, key), list):
            return key, root[key]
    return None


def _assert_sniffed_alike(root: Any, name: str) -> None:
    found = _array(root)
    if found is None:
        return
    key, items = found
    empty: Any = [] if key is None else {**root, key: []}
    for keep in (None, *(fmt.id for fmt in DOCUMENT_FORMATS)):
        sniffing = registry.DocumentSniff(empty, key, name, keep=keep)
        for item in items:
            sniffing.see(item)
        assert sniffing.surest() == registry.sniff([root], name, jsonl=False), (name, keep)
        expected = registry.sniff([root], name, jsonl=False, loose=False)
        assert sniffing.surest(loose=False) == expected, (name, keep)
        if keep is not None:
            fmt = FORMATS[keep]
            assert sniffing.confidence(fmt) == registry.confidence(fmt, [root], name), name


@pytest.mark.parametrize("name, root", ROOTS, ids=[name for name, _ in ROOTS])
def test_every_sample_document_is_sniffed_as_whole(name: str, root: Any) -> None:
    _assert_sniffed_alike(root, name)


def _pool() -> list[Any]:
    messages = []
    for _, root in ROOTS:
        found = _array(root)
        if found is not None:
            messages.extend(found[1][:40])
    return messages


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(0, 12), body=st.booleans())
def test_documents_mixing_formats_are_sniffed_as_whole(seed: int, size: int, body: bool) -> None:
    pool = _pool()
    rng = random.Random(seed)
    items = [rng.choice(pool) for _ in range(size)]
    _assert_sniffed_alike({"messages": items} if body else items, "mixed.json")
