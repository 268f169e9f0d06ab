"""A JSON document is decoded once: the spans found without decoding are those a full scan finds."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import sessions
from transcripts import formats
from transcripts.core.model import Transcript

# The module, not the `load` function the package re-exports under the same name.
LOADER = importlib.import_module("transcripts.formats.loader")
SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
DOCUMENTS = sorted(p for p in SAMPLES.glob("*/*.json") if not p.name.endswith(".expect.json"))


def _layout(transcript: Transcript) -> list[tuple[int, int, int, str, object]]:
    return [(r.start, r.end, r.line, r.kind, r.error) for r in transcript.records]


def _both(data: bytes, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The document read whole (test_document_stream.py holds the element-wise read to it).
    monkeypatch.setattr(LOADER, "_stream_document", lambda *args: None)
    fast = formats.load(data, name)
    with monkeypatch.context() as m:
        m.setattr(LOADER, "array_spans", lambda *args: None)  # the scan that decodes again
        scanned = formats.load(data, name)
    assert (fast.format, _layout(fast)) == (scanned.format, _layout(scanned))
    assert fast.style == scanned.style
    assert [r.calls for r in fast.records] == [r.calls for r in scanned.records]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_sample_document_has_the_spans_a_scan_finds(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _both(path.read_bytes(), path.name, monkeypatch)


@settings(max_examples=40, deadline=None)
@given(script=sessions.scripts(), indent=st.sampled_from([None, 1, 2, 4]))
def test_generated_documents_have_the_spans_a_scan_finds(
    script: sessions.Script, indent: int | None
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both(sessions.openai_chat(script, indent), "chat.json", monkeypatch)
        _both(sessions.anthropic(script, indent), "messages.json", monkeypatch)


@pytest.mark.parametrize(
    "data",
    [
        b'{"model": "x", "messages": [{"role": "user", "content": "a"}],'
        b' "messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]}',
        b'{"messages": [{"role": "user", "content": "[{\\"\\\\}]"},'
        b' {"role": "assistant", "content": "]}"}]}',
        b'\xef\xbb\xbf \n[{"role":"user","content":"na\xc3\xafve"} ,\n'
        b' {"role":"assistant","content":"ok"}]',
        b'{"big": 123456789012345678901234567890, "messages": [{"role": "user", "content": "x"}]}',
    ],
    ids=["repeated key", "brackets in strings", "bom and spaces", "big integer"],
)
def test_odd_documents_have_the_spans_a_scan_finds(
    data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    _both(data, "odd.json", monkeypatch)
