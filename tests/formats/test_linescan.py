"""The C line scanner stores a line exactly as `Format.store_line` does, or leaves it alone.

`_linescan` reads a Claude Code or OpenClaw line's fields without building its JSON. For
every line it returns fields for, orjson must read the line, `store_line` must store it,
and the two stored records must be equal field by field; a line orjson refuses must never
be read. Lines come from every JSON-lines file of the repository and the shared samples,
generated sessions, hand-made edge cases, byte-level mutations of real lines and
hypothesis-built ones.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.model import Role
from transcripts.core.store import RecordStore, _Column
from transcripts.formats import linescan, source
from transcripts.formats.base import args_digest
from transcripts.formats.loader import load
from transcripts.formats.registry import FORMATS
from transcripts.formats.source import FileSource

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/samples")
FIELDS = (
    *("start", "end", "line", "role", "kind", "calls", "results", "other_blocks", "text"),
    *("uid", "parent", "message_id", "sidechain", "aborted", "interrupted", "error"),
)

pytestmark = pytest.mark.skipif(not linescan.SCANNERS, reason="built without a C compiler")


def test_the_scanner_is_built_where_a_compiler_is() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    assert linescan.BUILT, "transcripts/formats/_linescan.c was not built"


def _stored(fmt: str, raw: bytes, scanned: Any) -> dict[str, Any] | None:
    """Return the record `scanned` (or `store_line`, for None) stores for `raw`, or None."""
    store = RecordStore(raw)
    if scanned is None:
        obj = orjson.loads(raw)
        if not isinstance(obj, dict):
            return None
        try:
            if not FORMATS[fmt].store_line(obj, store, 0, len(raw), 1):
                return None
        except Exception:
            return None
    else:
        linescan.store_scanned(scanned, raw, store, 0, len(raw), 1)
    record = store[0]
    return {name: getattr(record, name) for name in FIELDS}


def _appended(fmt: str, raw: bytes) -> dict[str, Any] | None:
    """Return the record the C appender stores for `raw` after one other record, or None."""
    store = RecordStore(raw)
    store.append_message(0, 0, 1, "user", Role.USER, 0, "u0", None, None, (), ())
    if linescan.APPENDERS[fmt](store, raw, 0, len(raw), 2) is None:
        assert len(store) == 1, raw
        return None
    return _without_index(store[1])


def _without_index(record: Any) -> dict[str, Any]:
    """A record's fields but its line and index (which its calls and results hold too)."""
    fields = {name: getattr(record, name) for name in FIELDS if name != "line"}
    fields["calls"] = [(c.id, c.name, c.block, c.args, c.problem, c.family) for c in record.calls]
    fields["results"] = [
        (r.tool_call_id, r.block, r.is_error, r.text, r.family) for r in record.results
    ]
    return fields


def check(fmt: str, raw: bytes) -> bool:
    """Assert the scanner reads `raw` as `store_line` does; return whether it read it.

    The appender, which stores what the scanner reads itself, must store the same record,
    or leave the line (and the store) alone exactly where the scanner does.
    """
    scanned = linescan.SCANNERS[fmt](raw)
    appended = _appended(fmt, raw)
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        assert scanned is None, raw
        assert appended is None, raw
        return False
    if scanned is None:
        assert appended is None, raw
        return False
    expected = _stored(fmt, raw, None)
    assert _stored(fmt, raw, scanned) == expected, raw
    store = RecordStore(raw)
    assert FORMATS[fmt].store_line(orjson.loads(raw), store, 0, len(raw), 1), raw
    assert appended == _without_index(store[0]), raw
    return True


def _state(store: RecordStore) -> dict[str, Any]:
    """Every column, string and table of `store`, as values that compare."""
    state: dict[str, Any] = {}
    for name, value in vars(store).items():
        if name in ("source", "_tails", "_columns", "_read"):
            continue
        if isinstance(value, _Column):
            value = list(value)
        elif name == "_arena":
            value = [bytes(chunk) for chunk in value[:-1]] + [
                bytes(chunk[: store._arena_used]) for chunk in value[-1:]
            ]
        state[name] = value
    return state


@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_a_file_appended_in_c_leaves_the_store_as_python_does_to_the_byte(
    fmt: str, generated: dict[str, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Columns, arena, shared strings and tables: the same with the appender and without."""
    path = tmp_path / f"{fmt}.jsonl"
    # Enough lines to cross column chunks (4,096 records) and arena chunks (256 KiB).
    path.write_bytes(b"\n".join(generated[fmt] * 12) + b"\n")
    with FileSource(path) as source:
        fast = load(source, path.name, fmt, summaries=False).records
        monkeypatch.setattr(linescan, "APPENDERS", {})
        monkeypatch.setattr(linescan, "LINES_APPENDERS", {})
        slow = load(source, path.name, fmt, summaries=False).records
    assert isinstance(fast, RecordStore) and isinstance(slow, RecordStore)
    assert len(fast) == len(slow) == 12 * len(generated[fmt])
    assert len(fast._start.chunks) > 1 and len(fast._call_block.chunks) > 1
    assert len(fast._arena) > 1 or fmt == "openclaw"  # its short ids fill less than a chunk
    assert _state(fast) == _state(slow)


def _lines(fmt: str) -> list[bytes]:
    roots = [ROOT / "demo" / "samples", ROOT / "tests", SHARED]
    lines: list[bytes] = []
    for root in roots:
        for path in sorted(root.rglob("*.jsonl")) if root.is_dir() else ():
            data = path.read_bytes()
            if fmt == "openclaw" and b'"type":"message"' not in data.replace(b" ", b""):
                continue
            if fmt == "claude_code" and b'"parentUuid"' not in data:
                continue
            lines += [line for line in data.splitlines() if line.strip()]
    return lines


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    out = tmp_path_factory.mktemp("linescan")
    found: dict[str, list[bytes]] = {}
    for fmt in ("claude_code", "openclaw"):
        path = out / f"{fmt}.jsonl"
        subprocess.run(
            [sys.executable, str(ROOT / "tools" / "gen_sessions.py"), "--format", fmt]
            + ["--records", "1500", "--seed", "7", "--fault-rate", "0.05", "--out", str(path)],
            check=True,
            capture_output=True,
        )
        found[fmt] = path.read_bytes().splitlines()
    return found


@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_every_line_of_every_file_is_read_as_store_line_reads_it(fmt: str) -> None:
    lines = _lines(fmt)
    assert len(lines) > 100
    read = sum(check(fmt, line) for line in lines)
    assert read > 50


@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_generated_lines_are_read_as_store_line_reads_them(
    fmt: str, generated: dict[str, list[bytes]]
) -> None:
    lines = generated[fmt]
    read = sum(check(fmt, line) for line in lines)
    assert read / len(lines) > 0.9


@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_mutated_lines_are_read_as_orjson_and_store_line_read_them(
    fmt: str, generated: dict[str, list[bytes]]
) -> None:
    """Bytes dropped, doubled, replaced and inserted: each mutant read as orjson reads it."""
    rng = random.Random(15)
    pool = [line for line in generated[fmt] if len(line) < 4000][:300]
    alphabet = (
        b'{}[]:,"\\ \t\r\n0123456789-+.eEtrufalsn\x00\x1f\x7f\x80\xbf\xc3\xa9\xed\xa0\xf4\x90u'
    )
    tried = 0
    for line in pool:
        for _ in range(20):
            data = bytearray(line)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(data))
                move = rng.randrange(4)
                if move == 0:
                    del data[at]
                elif move == 1:
                    data.insert(at, data[at])
                elif move == 2:
                    data[at] = rng.choice(alphabet)
                else:
                    data[at:at] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
            check(fmt, bytes(data))
            tried += 1
    assert tried >= 6000


def _cc(content: Any, **top: Any) -> bytes:
    obj = {"type": "user", "uuid": "u1", "parentUuid": "p1", "message": {"content": content}}
    obj.update(top)
    return orjson.dumps(obj)


def _oc(message: Any, **top: Any) -> bytes:
    obj = {"type": "message", "id": "e1", "parentId": "e0", "message": message}
    obj.update(top)
    return orjson.dumps(obj)


MARKERS = [
    f"[openclaw] {OPENCLAW_SENTENCE}",
    f"  [moltbot]   {OPENCLAW_SENTENCE}",
    "No result provided",
    "Skipped due to queued user message.",
    "[Tool result missing due to internal error]",
    "aborted",
    "\naborted",
    '{"ok": false, "error": "interrupted"}',
    "\u00a0aborted",
    "",
    "     1\tfirst line",
    " " * 40 + "x",
    "\t\n\r\x0c[openclaw] x",
    "\x0b\x1caborted",
    "\x08aborted",
    "/No",
    '"quoted"',
]

EDGES_CC = (
    [
        # keys repeated: orjson keeps the last one
        b'{"type":"user","uuid":"a","uuid":"b","message":{"content":"x"}}',
        b'{"type":"user","type":"assistant","uuid":"a","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","message":{"content":"x"},"message":{"content":[]}}',
        b'{"type":"user","uuid":"a","message":{"content":[{"type":"tool_result","tool_use_id":"t",'
        b'"tool_use_id":"u","content":"ok"}]}}',
        # escapes in keys and in the strings read
        b'{"typ\\u0065":"user","uuid":"a","message":{"content":"x"}}',
        b'{"type":"us\\u0065r","uuid":"a","message":{"content":"x"}}',
        b'{"type":"user","uuid":"\\u0061","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","message":{"content":[{"type":"tool_use","id":"t\\"1",'
        b'"name":"Bash","input":{}}]}}',
        # values of other types where a string is read
        b'{"type":"user","uuid":7,"parentUuid":[1],"message":{"content":"x"}}',
        b'{"type":"assistant","uuid":"a","message":{"id":5,"content":"x"}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"tool_use","id":5,'
        b'"name":"Bash","input":{}}]}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"tool_use","id":"t",'
        b'"name":false,"input":{}}]}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"text","text":5}]}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":7}]}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[1,"x",null,{}]}}',
        b'{"type":"assistant","uuid":"a","message":"x"}',
        b'{"type":"assistant","uuid":"a"}',
        b'{"type":"assistant","uuid":"a","message":{}}',
        b'{"type":"assistant","uuid":"a","message":{"content":""}}',
        b'{"type":"assistant","uuid":"a","message":{"content":null}}',
        b'{"type":"assistant","uuid":"a","isSidechain":true,"message":{"content":[]}}',
        b'{"type":"assistant","uuid":"a","isSidechain":1,"message":{"content":[]}}',
        b'{"type":"assistant","uuid":"a","isApiErrorMessage":true,"message":{"model":"<synthetic>",'
        b'"content":[{"type":"text","text":"API Error"}]}}',
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"tool_use","id":"t",'
        b'"name":"Bash"},{"type":"tool_use","id":" ","name":"","input":"{\\"a\\": 1"},'
        b'{"type":"tool_use","id":"t2","name":"Bash","input":null},'
        b'{"type":"tool_use","name":"x y","input":{"b":1,"a":[1.5e3,-0,true]}}]}}',
        # numbers orjson reads or refuses at the edges
        b'{"type":"user","uuid":"a","n":1e400,"message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","n":1e99,"message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","n":123456789012345678901234567890,"message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","n":-0.0e-0,"message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","n":01,"message":{"content":"x"}}',
        # strings at the edges of what orjson reads
        b'{"type":"user","uuid":"a","s":"\\ud83d\\ude00","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\\ud83d","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\\ude00","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\xed\xa0\x80","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\xc0\xaf","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\xf4\x90\x80\x80","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"\x7f\xe6\x97\xa5","message":{"content":"x"}}',
        b'{"type":"user","uuid":"a","s":"tab\there","message":{"content":"x"}}',
        b'\xef\xbb\xbf{"type":"user","uuid":"a","message":{"content":"x"}}',
        b' \t{"type":"user","uuid":"a","message":{"content":"x"}} \r',
        b'{"type":"user","uuid":"a","message":{"content":"x"}}\x0c',
        b'{"type":"user","uuid":"a","message":{"content":"x"}}{}',
        b'[{"type":"user"}]',
        b'{"type":"user","uuid":"a","message":{"content":"x"},}',
        # deep nesting inside a value read whole, and beyond the scanner's own limit
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"tool_use","id":"t",'
        b'"name":"B","input":' + b"[" * 150 + b"]" * 150 + b"}]}}",
        b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"text","text":"x","d":'
        + b"[" * 300
        + b"]" * 300
        + b"}]}}",
    ]
    + [_cc([{"type": "tool_result", "tool_use_id": "t", "content": text}]) for text in MARKERS]
    + [
        _cc([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": t}]}])
        for t in MARKERS
    ]
    + [
        _cc([{"type": "tool_result", "tool_use_id": "t", "content": [{"text": 5}], "is_error": 1}]),
        _cc([{"type": "tool_result", "tool_use_id": None, "content": [], "is_error": True}]),
        _cc([{"type": "tool_result", "content": {"text": "x"}}]),
        _cc([{"type": "tool_result", "tool_use_id": "t"}]),
        _cc([{"type": "tool_use", "id": f"t{k}", "name": "B", "input": {}} for k in range(70)]),
    ]
)

EDGES_OC = (
    [
        _oc({"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": t}]})
        for t in MARKERS
    ]
    + [
        _oc({"role": "toolResult", "toolCallId": "c", "content": t, "isError": True})
        for t in MARKERS
    ]
    + [
        _oc({"content": [{"type": "text", "text": "x"}], "role": "toolResult", "toolCallId": "c"}),
        _oc({"role": "toolResult", "toolCallId": None, "toolUseId": "u", "content": "x"}),
        _oc({"role": "toolResult", "toolUseId": "u", "content": "x"}),
        _oc({"role": "toolResult", "toolCallId": 3, "content": "x"}),
        _oc({"role": "assistant", "content": "hi", "stopReason": "stop"}),
        _oc({"role": "assistant", "content": [], "stopReason": "aborted"}),
        _oc({"role": "assistant", "content": [], "stopReason": "length"}),
        _oc({"role": "assistant", "content": [], "stopReason": "error", "errorMessage": " "}),
        _oc({"role": "assistant", "content": [], "errorMessage": " \n "}),
        _oc({"role": "assistant", "content": [], "errorMessage": "\u00a0"}),
        _oc({"role": "assistant", "content": [], "errorMessage": "rate limited"}),
        _oc({"role": "assistant", "content": [], "errorMessage": 5}),
        _oc({"role": "assistant", "content": [], "stopReason": 5}),
        _oc(
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
                    {"type": "toolUse", "id": "c2", "name": "read", "input": {"path": "b"}},
                    {
                        "type": "functionCall",
                        "id": "c3",
                        "name": "x",
                        "arguments": None,
                        "input": {},
                    },
                    {"type": "toolCall", "id": "c4", "name": "x", "partialJson": '{"a"'},
                    {
                        "type": "toolCall",
                        "id": "c5",
                        "name": "x",
                        "partialJson": "",
                        "arguments": {},
                    },
                    {"type": "toolCall", "id": "c6", "name": "x", "arguments": '{"a": 1}'},
                    {"type": "tool_result", "tool_use_id": "c1", "content": "x"},
                    {"type": "thinking", "thinking": "..."},
                    "loose",
                    {"type": "text", "text": "done"},
                ],
            }
        ),
        _oc({"role": "user", "content": "hello"}),
        _oc({"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}),
        _oc({"role": "user", "content": [{"type": "image", "data": "..."}]}),
        _oc({"role": "user", "content": None}),
        _oc({"role": "custom", "content": []}),
        _oc({"role": 5, "content": "x"}),
        _oc({"role": "user", "content": "x"}, type="custom_message"),
        _oc({"role": "user", "content": "x"}, id=None, parentId=3),
        _oc("not an object"),
    ]
)


# Arguments are digested from their bytes only when orjson would write them so.
EDGES_ARGS = [
    b'{"type":"assistant","uuid":"a","message":{"content":[{"type":"tool_use","id":"t",'
    b'"name":"Bash","input":' + args + b"}]}}"
    for args in [
        b"{}",
        b'{"a":1,"b":[true,false,null],"c":{"d":"e"}}',
        b'{"b":1,"a":2}',
        b'{"a":1,"a":2}',
        b'{"a":1,"ab":2,"b":3}',
        b'{"ab":1,"a":2}',
        b'{"a": 1}',
        b'{"a":-0}',
        b'{"a":0}',
        b'{"a":-1}',
        b'{"a":1.0}',
        b'{"a":1e2}',
        b'{"a":12345678901234567890}',
        b'{"a":"\\u00e9"}',
        b'{"a":"\\/"}',
        b'{"a":"\\"\\\\\\n\\t\\r\\b\\f"}',
        b'{"a\\"":1}',
        '{"é":1,"z":2}'.encode(),
        '{"z":1,"é":2}'.encode(),
        '{"\\uffff":1,"😀":2}'.encode(),
        '{"\uffff":1,"😀":2}'.encode(),
        '{"😀":1,"\uffff":2}'.encode(),
        b'{"command":"' + b"x" * 300 + b'"}',
        b'{"command":"' + "é".encode() * 300 + b'"}',
        b"[1,2]",
        b'"text"',
        b'{"a":[{"c":1,"b":2}]}',
    ]
]


@pytest.mark.parametrize("raw", EDGES_ARGS, ids=range(len(EDGES_ARGS)))
def test_call_arguments_edges(raw: bytes) -> None:
    check("claude_code", raw)
    scanned = linescan.SCANNERS["claude_code"](raw)
    assert scanned is not None


@pytest.mark.parametrize("raw", EDGES_CC, ids=range(len(EDGES_CC)))
def test_claude_code_edges(raw: bytes) -> None:
    check("claude_code", raw)


@pytest.mark.parametrize("raw", EDGES_OC, ids=range(len(EDGES_OC)))
def test_openclaw_edges(raw: bytes) -> None:
    check("openclaw", raw)


def test_a_call_block_in_a_tool_result_written_before_its_role_is_no_call() -> None:
    """An OpenClaw toolResult's content is its text, whatever the order of its keys.

    With `content` written before `role`, the scanner read the content block
    by block and kept a `toolCall` block in it as a call of the entry;
    store_line reads none there. Stored so, the entry was not taken for a
    result on another branch, and a streamed repair answered its call again.
    """
    call = {"type": "toolCall", "id": "c9", "name": "bash", "arguments": {}}
    raw = _oc({"content": [call], "role": "toolResult", "toolCallId": "c1"})
    assert check("openclaw", raw)
    scanned = linescan.SCANNERS["openclaw"](raw)
    assert scanned is not None
    assert scanned[7] == ()  # no call
    assert [result[1] for result in scanned[8]] == ["c1"]


def test_the_edges_cover_both_outcomes() -> None:
    """Some edge lines are read by the scanner, some left to orjson (else the test says little)."""
    cc = [check("claude_code", raw) for raw in EDGES_CC]
    oc = [check("openclaw", raw) for raw in EDGES_OC]
    assert 10 < sum(cc) < len(cc) - 10
    assert 10 < sum(oc) < len(oc) - 5


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(MARKERS)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_block = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["text", "tool_use", "tool_result", "toolCall", "toolUse", "thinking", 5, None]
        ),
        "id": st.sampled_from(["t1", "", " ", None, 3]),
        "name": st.sampled_from(["Bash", "", None, "x y"]),
        "text": _scalars,
        "input": _values,
        "arguments": _values,
        "partialJson": st.text(max_size=4),
        "tool_use_id": st.sampled_from(["t1", "", None, 4]),
        "is_error": _scalars,
        "content": _values,
    },
)
_content = st.lists(_block | _values, max_size=4) | _values
_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "toolResult", "custom", 5]),
        "id": st.sampled_from(["m1", None, 5]),
        "content": _content,
        "stopReason": st.sampled_from(["stop", "error", "aborted", "length", None]),
        "errorMessage": _scalars,
        "toolCallId": st.sampled_from(["c", None, 2]),
        "toolUseId": st.sampled_from(["c", None]),
        "isError": _scalars,
    },
)
_line = st.fixed_dictionaries(
    {"message": _message | _values},
    optional={
        "type": st.sampled_from(["user", "assistant", "message", "summary", 1]),
        "uuid": st.sampled_from(["u1", "", None, 5]),
        "parentUuid": st.sampled_from(["u0", None]),
        "id": st.sampled_from(["e1", None, 2]),
        "parentId": st.sampled_from(["e0", None]),
        "isSidechain": _scalars,
        "isApiErrorMessage": st.booleans(),
    },
)


@settings(max_examples=400, deadline=None)
@given(_line, st.sampled_from(["claude_code", "openclaw"]), st.booleans(), st.booleans())
def test_built_lines_are_read_as_store_line_reads_them(
    line: dict[str, Any], fmt: str, spaced: bool, ascii: bool
) -> None:
    text = json.dumps(line, ensure_ascii=ascii, indent=1 if spaced else None)
    check(fmt, text.replace("\n", " ").encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
@pytest.mark.parametrize("chunk", [1 << 20, 4096, 700])
def test_lines_appended_a_chunk_at_a_time_are_stored_as_one_by_one(
    eol: bytes,
    chunk: int,
    generated: dict[str, list[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Line ends, blank and space-only lines, and lines cut by a chunk's end: the same store."""
    lines = generated["claude_code"][:400]
    odd = [b"", b"   ", b"\t \x0b\x0c", b"\r", b" {", b"[]"]
    body = [line for k, line in enumerate(lines) for line in [line, *odd[k % 7 : k % 7 + 1]]]
    path = tmp_path / "session.jsonl"
    path.write_bytes(eol.join(body) + eol)
    monkeypatch.setattr(source, "CHUNK", chunk)
    with FileSource(path) as data:
        fast = load(data, path.name, "claude_code", summaries=False)
        monkeypatch.setattr(linescan, "LINES_APPENDERS", {})
        slow = load(data, path.name, "claude_code", summaries=False)
    assert isinstance(fast.records, RecordStore) and isinstance(slow.records, RecordStore)
    assert _state(fast.records) == _state(slow.records)
    assert [r.error for r in fast.records] == [r.error for r in slow.records]
    assert len(fast.records) > 400


_args = st.dictionaries(st.text(max_size=8), _values, max_size=6)


@settings(max_examples=600, deadline=None)
@given(_args, st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_arguments_are_rewritten_as_orjson_writes_them_sorted(
    args: dict[str, Any], ascii: bool, spaced: bool, rng: random.Random
) -> None:
    """A call's arguments in any key order, spacing and escapes: orjson's sorted bytes, or None."""
    from transcripts.formats._linescan import canonical_args

    items = list(args.items())
    rng.shuffle(items)
    text = json.dumps(dict(items), ensure_ascii=ascii, indent=1 if spaced else None)
    raw = text.encode("utf-8", "surrogatepass")
    try:
        expected = orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, TypeError):
        expected = None
    written = canonical_args(raw)
    if written is not None:
        assert written == expected, raw
    elif expected is not None:
        # Left to orjson only for what it reads otherwise: a fraction, an exponent or a big
        # integer, or an integer written as -0.
        assert re.search(rb"[-\d][.eE]|\d{19}|-0\b|[^\\]\d\.", raw), raw


@pytest.mark.parametrize(
    "raw",
    [b'{"a":1,"a":2}', b'{"a":1.0}', b'{"a":-0}', b'{"a":1e2}', b'{"a":12345678901234567890}'],
)
def test_arguments_orjson_reads_otherwise_are_left_to_it(raw: bytes) -> None:
    from transcripts.formats._linescan import canonical_args

    assert canonical_args(raw) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_the_c_digest_is_args_digest(text: str) -> None:
    """BLAKE2b written in C (RFC 7693), against hashlib's, over block edges and non-ASCII."""
    from transcripts.formats._linescan import args_digest as c_digest

    data = text.encode("utf-8", "surrogatepass")
    whole = hashlib.blake2b(data, digest_size=9).digest()
    assert c_digest(data) == "#" + base64.urlsafe_b64encode(whole).decode()
    if text:
        assert c_digest(data) == args_digest(text)


def _cc_line(uid: Any, parent: Any, content: Any, kind: str = "user") -> bytes:
    message = {"role": kind, "content": content}
    return orjson.dumps({"type": kind, "uuid": uid, "parentUuid": parent, "message": message})


def _use(call_id: str, name: str = "Bash", args: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args or {"b": 1, "a": ""}}


def _result(call_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


_UUID = "0123abcd-0000-4000-8000-00000000000{}"
_BIG = "x" * (300 << 10)  # past an arena chunk: kept whole in `_long`
_EXACT = "y" * (256 << 10)  # exactly an arena chunk
EDGE_FILES_CC = {
    # a uid repeated, a parent that is the record's own uid, records without one
    "same uid": [_cc_line("u1", None, "hi")] * 3
    + [_cc_line("u1", "u1", "x"), _cc_line("u2", "u2", "x"), _cc_line("u2", "u1", "x")]
    + [_cc_line(None, None, "x"), _cc_line(None, None, "x"), _cc_line("u3", None, "y")],
    # UUIDs packed to 16 bytes only when lowercase
    "uuid case": [
        _cc_line(_UUID.format(1), None, "hi"),
        _cc_line(_UUID.format(2).upper(), _UUID.format(1), "x"),
        _cc_line(_UUID.format(3), _UUID.format(2).upper(), "y"),
        _cc_line("0123ABCD-0000-4000-8000-000000000004", _UUID.format(3), "z"),
    ],
    "long strings": [
        _cc_line("u0", None, "a"),
        _cc_line(_BIG, "u0", "x"),
        _cc_line("u2", _BIG, "y"),
        _cc_line("u3", "u2", [_use(_BIG, "B")], "assistant"),
        _cc_line("u4", "u3", [_result(_BIG)]),
        _cc_line(_EXACT, "u4", "x"),
        _cc_line("u6", _EXACT, "y"),
    ],
    # 62 calls a line (a row's most), past 4,096 call rows and shared strings
    "many calls": [
        _cc_line(f"a{k}", f"a{k - 1}", [_use(f"t{k}_{j}") for j in range(62)], "assistant")
        for k in range(80)
    ],
    "non-ascii": [
        _cc_line(
            f"é{k}", f"é{k - 1}", [_use(f"ü{k}", "名前", {"é": "\u2028", "": [k]})], "assistant"
        )
        for k in range(20)
    ],
    "results not plain": [
        _cc_line(
            f"r{k}",
            None,
            [
                _result("t", [{"type": "text", "text": MARKERS[4]}]),
                _result("t2", "No result provided"),
                *(_result("t3", {"a": 1}), _result("t4", [1, 2]), _result("t5", None)),
            ],
        )
        for k in range(10)
    ],
}


@pytest.mark.parametrize("chunk", [1 << 20, 333])
@pytest.mark.parametrize("name", sorted(EDGE_FILES_CC))
def test_edge_files_appended_in_c_leave_the_store_as_python_does(
    name: str,
    chunk: int,
    generated: dict[str, list[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Repeated and self-parented uids, UUID case, long strings, full rows: the same store."""
    path = tmp_path / "session.jsonl"
    # Past the lines the loader sniffs (50) as Records, before the appenders take over.
    lines = generated["claude_code"][:60] + EDGE_FILES_CC[name] * 2
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    monkeypatch.setattr(source, "CHUNK", chunk)
    with FileSource(path) as data:
        fast = load(data, path.name, "claude_code", summaries=False).records
        monkeypatch.setattr(linescan, "APPENDERS", {})
        monkeypatch.setattr(linescan, "LINES_APPENDERS", {})
        slow = load(data, path.name, "claude_code", summaries=False).records
    assert isinstance(fast, RecordStore) and isinstance(slow, RecordStore)
    assert len(fast) == len(slow) == len(lines)
    assert _state(fast) == _state(slow)


def test_a_store_without_an_arena_chunk_is_refused_not_written_past() -> None:
    """A store whose arena lacks the chunk `_arena_used` speaks of: an error, not a crash.

    The appender wrote the line's strings into `_arena[-1]` unchecked, so a store
    whose arena was emptied (`_arena = []` with `_arena_used` 0) read a list item
    before the list and the process died (SIGSEGV). Run in a child process, so the
    crash fails this test rather than ending the run.
    """
    code = (
        "import orjson\n"
        "from transcripts.formats import linescan\n"
        "from transcripts.core.store import RecordStore\n"
        "line = orjson.dumps({'type': 'user', 'uuid': 'u1', 'message': {'content': 'x'}})\n"
        "store = RecordStore(line)\n"
        "store._arena, store._arena_used = [], 0\n"
        "try:\n"
        "    linescan.APPENDERS['claude_code'](store, line, 0, len(line), 1)\n"
        "except TypeError as exc:\n"
        "    print('refused:', exc)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.startswith("refused: a store's arena is not its chunks"), ran.stdout
