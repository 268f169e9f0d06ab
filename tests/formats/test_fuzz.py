"""Fuzzing: hostile shapes inside otherwise well-formed sessions never raise."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transcripts.engine import PRESETS, analyze

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
FILES = sorted(
    p
    for p in [*SAMPLES.glob("formats/*"), *SAMPLES.glob("cases/*")]
    if not p.name.endswith(".expect.json")
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for k, item in enumerate(value):
            found.extend(_paths(item, (*prefix, k)))
    return found


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


def _documents(path: Path) -> tuple[bool, list[Any]]:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return True, [json.loads(line) for line in text.splitlines() if line.strip()]
    return False, [json.loads(text)]


# The suite runs a few hundred inputs; PAIRFIX_FUZZ_EXAMPLES asks for a longer run.
@settings(
    max_examples=int(os.environ.get("PAIRFIX_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(FILES),
    data=st.data(),
    policy=st.sampled_from(sorted(PRESETS)),
)
def test_a_mutated_session_is_read_or_refused_but_never_raises(
    path: Path, data: st.DataObject, policy: str
) -> None:
    jsonl, docs = _documents(path)
    k = data.draw(st.integers(0, len(docs) - 1))
    target = data.draw(st.sampled_from(_paths(docs[k])))
    docs[k] = _replace(docs[k], target, data.draw(json_values))
    if jsonl:
        raw = "".join(json.dumps(doc) + "\n" for doc in docs).encode()
    else:
        raw = json.dumps(docs[0], indent=2).encode()
    result = analyze(raw, path.name, policy)
    assert isinstance(result.rows, list)
    if result.error is None:
        again = analyze(result.repaired, path.name, policy)
        assert isinstance(again.rows, list)
