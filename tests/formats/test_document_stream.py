"""A JSON document read an element at a time gives what reading it whole gave, byte for byte.

The oracle is the whole read itself (`loader._stream_document` turned off):
every sample and fixture document, generated documents of every document
format with faults of every kind, each written one element a line, on one
line and indented, under every policy preset; and hostile documents. Each is
also read as `pairfix fix` reads it (a FileSource, no previews, garbage
collection paused): the same report, counts, records but for their preview
texts, and repaired bytes, written to a file and to a stream.
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import hostile, sessions
from transcripts.cli import report
from transcripts.core.layout import layout, sparse_layout
from transcripts.core.markers import synthetic_marker
from transcripts.core.model import Plan, ToolResult, Transcript
from transcripts.core.policy import PRESETS
from transcripts.engine import Analysis, FileSource, analyze
from transcripts.formats import renderer
from transcripts.formats.registry import FORMATS

LOADER = importlib.import_module("transcripts.formats.loader")
ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/samples")
DOCUMENTS = sorted(
    {
        p
        for base in (ROOT / "demo" / "samples", ROOT / "tests", SHARED)
        for p in base.rglob("*.json")
        if not p.name.endswith((".expect.json", ".faults.json"))
    }
)
ARRAYS = ("messages", "contents", "history", "input")
BEDROCK = [
    {"role": "user", "content": [{"text": "list"}]},
    {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "ls", "input": {"path": "."}}}],
    },
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "a"}]}}]},
    {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t2", "name": "cat", "input": {"path": "a"}}}],
    },
    {"role": "user", "content": [{"text": "stop"}]},
]
FUNCTIONS = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": "{}"}},
    {"role": "function", "name": "w", "content": "sunny"},
    {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": "{"}},
    {"role": "user", "content": "and?"},
]


def _outcome(analysis: Analysis, previews: bool = True) -> dict[str, Any]:
    """Return everything a user of the analysis sees: report, plan, records, repaired bytes.

    Without `previews`, the records' preview texts (`Record.text`) are left out, and
    of a result's text only which earlier repair's marker it is.
    """
    records = analysis.transcript.records if analysis.transcript else []
    return {
        "error": analysis.error,
        "format": analysis.format,
        "provider": analysis.provider,
        "count": analysis.record_count,
        "faults": analysis.faults,
        "ops": analysis.plan.ops,
        "repaired": analysis.repaired,
        "records": [
            (r.index, r.start, r.end, r.line, r.role, r.kind, r.text if previews else None)
            + (r.error, r.uid, r.parent)
            + (r.calls, r.results if previews else [_result(x) for x in r.results])
            + (r.other_blocks, r.inactive, r.aborted, r.obj)
            for r in records
        ],
        "style": analysis.transcript.style if analysis.transcript else None,
        "server_history": analysis.transcript.server_history if analysis.transcript else None,
    }


def _result(result: ToolResult) -> tuple[Any, ...]:
    """Return a result's fields, its text only as the marker it is (see `markers`)."""
    marker = synthetic_marker(result.text)
    return (
        result.tool_call_id,
        result.record,
        result.block,
        result.is_error,
        result.family,
        marker,
    )


def _written_slot_by_slot(transcript: Transcript, plan: Plan) -> bytes:
    """Return the repaired document as the writer wrote it before: every slot of `layout`."""
    out = io.BytesIO()
    writer = renderer._Writer(transcript.raw, out)
    fmt = FORMATS[transcript.format]
    if not plan or not transcript.records:
        return transcript.raw  # type: ignore[return-value]
    transcript = renderer._renamed(transcript, fmt, plan)
    at = sparse_layout(transcript, plan)
    parents = renderer._relink(transcript, fmt, at) if transcript.tree else {}
    keeps = renderer._rekeep(transcript, fmt, at) if transcript.tree else {}
    records, sep = transcript.records, transcript.style.sep
    writer.raw(0, records[0].start)
    previous: int | None = None
    for k, slot in enumerate(s for s in layout(transcript, plan) if s.written):
        own = renderer._own(slot)
        if k:
            if own is not None and previous is not None and own == previous + 1:
                writer.raw(records[previous].end, records[own].start)
            else:
                writer.bytes(sep)
        untouched = own is not None and slot.block_order is None
        untouched = untouched and own not in parents and own not in keeps
        if untouched and own not in transcript.style.renamed:
            writer.raw(records[own].start, records[own].end)
        else:
            writer.bytes(renderer._record_bytes(transcript, fmt, slot, parents, keeps))
        previous = own
    writer.raw(records[-1].end, len(transcript.raw))
    writer.flush()
    return out.getvalue()


def _whole(data: bytes, name: str, policy: str, format: str | None) -> Analysis:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(LOADER, "_stream_document", lambda *args, **kwargs: None)
        return analyze(data, name, policy, format=format)


def _facts(analysis: Analysis, name: str) -> dict[str, Any]:
    """Return what `pairfix fix` reports of the analysis: its report and the counts after."""
    counts = analysis.repaired_counts() if analysis.error is None else None
    return {"report": report(analysis, name), "counts": counts}


def _as_fix_reads(data: bytes, name: str, policy: str, format: str | None, whole: Analysis) -> None:
    """Assert that `data` read as `pairfix fix` reads it gives what `whole` gave."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(data)
        f.flush()
        with FileSource(f.name) as source:
            fixed = analyze(source, name, policy, format=format, summaries=False)
            assert gc.isenabled()  # paused for the analysis only
            assert _outcome(fixed, previews=False) == _outcome(whole, previews=False), name
            assert _facts(fixed, name) == _facts(whole, name), (name, policy, format)
            if fixed.error is None:
                out = io.BytesIO()
                fixed.write_repaired(out)
                assert out.getvalue() == whole.repaired
                with tempfile.TemporaryFile() as written:
                    fixed.write_repaired(written)
                    written.seek(0)
                    assert written.read() == whole.repaired


def _same(
    data: bytes, name: str, policies: tuple[str, ...] = tuple(PRESETS), fix: bool = True
) -> None:
    """Assert `data` reads streamed as whole, and (`fix`) as `pairfix fix` reads it."""
    for policy in policies:
        for format in (None, "openai_chat", "anthropic"):
            streamed = analyze(data, name, policy, format=format)
            whole = _whole(data, name, policy, format)
            assert _outcome(streamed) == _outcome(whole), (name, policy, format)
            if whole.transcript is not None and not FORMATS[whole.format].jsonl:
                assert whole.repaired == _written_slot_by_slot(whole.transcript, whole.plan)
            if fix:
                _as_fix_reads(data, name, policy, format, whole)


def _messages(root: Any) -> tuple[str | None, list[Any]] | None:
    if isinstance(root, list):
        return None, root
    for key in ARRAYS:
        if isinstance(root, dict) and isinstance(root.get(key), list):
            return key, root[key]
    return None


def _with(root: Any, key: str | None, items: list[Any]) -> Any:
    return items if key is None else {**root, key: items}


def _writings(root: Any) -> list[bytes]:
    """Return `root` one element a line, on one line (two spacings) and indented."""
    found = _messages(root)
    out = [orjson.dumps(root), json.dumps(root).encode(), json.dumps(root, indent=2).encode()]
    if found is not None:
        key, items = found
        lines = b"[\n" + b",\n".join(orjson.dumps(item) for item in items) + b"\n]"
        if key is None:
            out.append(lines)
        else:
            rest = orjson.dumps({k: v for k, v in root.items() if k != key})
            head = b'{"' + key.encode() + b'":'
            out.append(head + lines + (b"," + rest[1:] if len(rest) > 2 else b"}"))
    return out


def _mutants(root: Any, rng: random.Random) -> list[Any]:
    """Return `root` with its messages cut, doubled, swapped, reversed or salted: faults."""
    found = _messages(root)
    if found is None:
        return []
    key, items = found
    out = []
    for _ in range(6):
        changed = list(items)
        if not changed:
            break
        k = rng.randrange(len(changed))
        how = rng.choice(("drop", "double", "swap", "reverse", "salt", "tail"))
        if how == "drop":
            del changed[k]
        elif how == "double":
            changed.insert(k, changed[k])
        elif how == "swap" and k + 1 < len(changed):
            changed[k], changed[k + 1] = changed[k + 1], changed[k]
        elif how == "reverse":
            changed.reverse()
        elif how == "salt":
            changed.insert(k, rng.choice([1, "x", None, [], {}, {"role": 3}]))
        else:
            changed = changed[:k]
        out.append(_with(root, key, changed))
    return out


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_sample_document_reads_as_it_did_whole(path: Path) -> None:
    data = path.read_bytes()
    _same(data, path.name)
    try:
        root = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    rng = random.Random(path.name)
    for k, written in enumerate(_writings(root)):
        _same(written, path.name, ("synthesize",) if k else tuple(PRESETS))
    for mutant in _mutants(root, rng):
        for written in _writings(mutant):
            _same(written, path.name, ("synthesize", "discard"))


@pytest.mark.parametrize(
    "root",
    [BEDROCK, {"messages": BEDROCK}, FUNCTIONS, {"model": "m", "messages": FUNCTIONS}],
    ids=["bedrock", "bedrock body", "functions", "functions body"],
)
def test_formats_without_a_sample_read_as_they_did_whole(root: Any) -> None:
    rng = random.Random(1)
    for mutant in [root, *_mutants(root, rng)]:
        for written in _writings(mutant):
            _same(written, "doc.json")


@settings(max_examples=25, deadline=None)
@given(script=sessions.scripts(), indent=st.sampled_from([None, 2]))
def test_scripted_faults_read_as_they_did_whole(
    script: sessions.Script, indent: int | None
) -> None:
    _same(sessions.openai_chat(script, indent), "chat.json")
    _same(sessions.anthropic(script, indent), "messages.json")
    _same(sessions.gemini(script), "contents.json")
    _same(sessions.openhands(script), "events.json")


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
def test_generated_sessions_of_every_fault_kind_read_as_they_did_whole(
    fmt: str, tmp_path: Path
) -> None:
    out = tmp_path / f"{fmt}.json"
    command = [sys.executable, str(ROOT / "tools" / "gen_sessions.py"), "--format", fmt]
    command += ["--records", "400", "--seed", "3", "--fault-rate", "0.3", "--out", str(out)]
    command += ["--result-bytes", "20:2000", "--parallel-rate", "0.3"]
    subprocess.run(command, check=True, capture_output=True)
    data = out.read_bytes()
    assert data.count(b"\n") > 300  # one element a line: read at its lines
    _same(data, out.name)
    _same(json.dumps(orjson.loads(data), indent=1).encode(), out.name, ("synthesize",))


@pytest.mark.parametrize(
    "data",
    [
        hostile.deeply_nested(5000),
        b'[{"role": "user", "content": ' + b"[" * 300 + b"]" * 300 + b"}]",
        b'{"messages": [{"role": "user", "content": "' + b"x" * 3_000_000 + b'"}]}',
        b'[{"role": "user", "content": "a\x00b"}]',
        b'[{"role": "user", "content": "a\\u0000b"},\n{"role": "tool", "tool_call_id": "c"}]',
        b'[{"role": "user", "content": "caf\xe9"}]',
        b'[\n{"role": "user", "content": "caf\xe9"},\n{"role": "assistant", "content": "x"}\n]',
        b'{"messages": [{"role": "user", "content": "a"}], "messages": [{"role": "user"}]}',
        b'{"messages": [{"role": "user", "content": "a", "role": "tool", "tool_call_id": "c"}]}',
        b'{"model": "a", "model": "b", "messages": [{"role": "tool", "tool_call_id": "c"}]}',
        b'[\n{"role": "user", "content": "a"},\n{"role": "user", "content": "b"}\n',
        b'[\n{"role": "user", "content": "a"},\n{"role": "user", "content": "b"}\n]x',
        b'[\n{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "c"},\n]',
        b'[\n{"role": "user", "content": "}, {"},\n{"role": "tool", "tool_call_id": "c"}\n]',
        b'[{"role":"user","content":"a"},\n{"role":"tool","tool_call_id":"c"}]',
        b'{"messages": [\n{"role": "tool", "tool_call_id": "c"}\n], "input": []}',
        b'{"input": [\n{"type": "function_call_output", "call_id": "c", "output": "x"}\n]}',
        b'{"contents": [\n{"role": "user", "parts": [{"text": "a"}]}\n], "messages": 3}',
        b"[\n1,\n[2],\n{}\n]",
        b"[]",
        b"{}",
        b'{"messages": []}',
        b'\xef\xbb\xbf[\n{"role": "tool", "tool_call_id": "c"}\n]\n',
        b'[{"role": "tool", "tool_call_id": "c", "n": 123456789012345678901234567890}]',
        b'[{"role": "tool", "tool_call_id": "c"}]\x0b',
    ],
    ids=lambda data: repr(data[:40]),
)
def test_hostile_documents_get_what_they_got_whole(data: bytes) -> None:
    _same(data, "hostile.json", ("synthesize",))


def test_a_document_sniffed_late_is_read_as_its_format() -> None:
    """A legacy call after the first elements makes the file OpenAI functions, read again."""
    plain = [{"role": "user", "content": f"m{k}"} for k in range(80)]
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": ""}}
    tools = [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}]
    data = b"[\n" + b",\n".join(orjson.dumps(m) for m in tools + plain + [legacy]) + b"\n]"
    streamed = analyze(data, "late.json")
    assert streamed.format == "openai_functions"
    assert _outcome(streamed) == _outcome(_whole(data, "late.json", "synthesize", None))


def test_a_streamed_document_keeps_no_parsed_element() -> None:
    data = (SHARED / "formats" / "openai_chat.json").read_bytes()
    transcript = LOADER.load(data, "openai_chat.json")
    assert transcript.format == FORMATS["openai_chat"].id
    assert all(r.parsed is None for r in transcript.records if r.error is None)
    assert transcript.records[0].obj == orjson.loads(data)[0]


def test_a_document_analysis_leaves_garbage_collection_as_it_found_it() -> None:
    data = (SHARED / "formats" / "openai_chat.json").read_bytes()
    assert gc.isenabled()
    assert analyze(data, "openai_chat.json", summaries=False).faults is not None
    assert gc.isenabled()
    gc.disable()
    try:
        analyze(data, "openai_chat.json", summaries=False)
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


def test_a_document_read_without_previews_keeps_no_preview_text() -> None:
    data = (SHARED / "formats" / "openai_chat.json").read_bytes()
    with_previews = LOADER.load(data, "openai_chat.json")
    without = LOADER.load(data, "openai_chat.json", summaries=False)
    assert any(r.text for r in with_previews.records)
    assert not any(r.text for r in without.records)
    results = [r for record in with_previews.records for r in record.results]
    assert results and all(r.text for r in results)
    assert not any(r.text for record in without.records for r in record.results)
    assert [r.calls for r in without.records] == [r.calls for r in with_previews.records]


def test_objects_the_process_froze_stay_frozen() -> None:
    # A worker freezes its start-up objects (project.celery); an analysis must not thaw them.
    from transcripts import engine

    engine._froze_its_own.cache_clear()  # asked afresh, of this process as frozen here
    data = (SHARED / "formats" / "openai_chat.json").read_bytes()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        for _ in range(3):
            analyze(data, "openai_chat.json", summaries=False)
        assert gc.get_freeze_count() > 0.9 * frozen  # not thawed (a few may have been freed)
    finally:
        gc.unfreeze()
        engine._froze_its_own.cache_clear()
