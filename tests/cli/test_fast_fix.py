"""`pairfix fix`'s streamed path gives what the whole-file path gives, byte for byte.

The whole-file path (`analyze(bytes)` with previews, `Analysis.repaired`) is
what the dashboard runs; `pairfix fix` streams the file (a FileSource,
summaries off) and writes it with the kernel's copy where it can. Every
JSON-lines input here, under every policy preset, must give both the same
repaired bytes and the same report (faults with their indices and provider
error texts, ops, counts).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import lone_surrogate, sessions
from transcripts import formats
from transcripts.cli import report
from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.policy import PRESETS
from transcripts.engine import FileSource, analyze
from transcripts.formats import linescan

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/samples")
GENERATOR = ROOT / "tools" / "gen_sessions.py"


def _jsonl_files() -> list[Path]:
    roots = [ROOT / "demo" / "samples", ROOT / "tests", SHARED]
    found = {p for root in roots if root.is_dir() for p in root.rglob("*.jsonl")}
    return sorted(found)


FILES = _jsonl_files()


def _facts(analysis: Any, name: str) -> dict[str, Any]:
    counts = analysis.repaired_counts() if analysis.error is None else None
    return {
        "report": report(analysis, name),
        "counts": analysis.fault_counts,
        "repaired_counts": counts,
        "record_count": analysis.record_count,
    }


def _assert_same(path: Path, policy: str, tmp_path: Path) -> None:
    """Assert the streamed repair of `path` equals the whole-file one, to a file and a stream."""
    data = path.read_bytes()
    whole = analyze(data, path.name, policy)
    expected = _facts(whole, path.name)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, policy, summaries=False)
        assert _facts(streamed, path.name) == expected
        if streamed.error is not None:
            return
        written = tmp_path / "out.jsonl"
        with open(written, "wb") as f:
            f.write(b"")  # nothing before: the copy starts at offset 0
            streamed.write_repaired(f)
        out = io.BytesIO()  # no descriptor: the bytes are read and written
        streamed.write_repaired(out)
    assert written.read_bytes() == whole.repaired
    assert out.getvalue() == whole.repaired


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_jsonl_file_repairs_streamed_as_whole(
    path: Path, policy: str, tmp_path: Path
) -> None:
    _assert_same(path, policy, tmp_path)


def test_the_inputs_cover_every_jsonl_format() -> None:
    seen = set()
    for path in FILES:
        result = analyze(path.read_bytes(), path.name)
        if result.error is None:
            seen.add(result.format)
    jsonl = {fmt for fmt, f in formats.FORMATS.items() if f.jsonl}
    assert {"claude_code", "openclaw", "codex", "gemini_cli"} <= seen
    assert seen <= jsonl


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Sessions of tools/gen_sessions.py: every format it writes as JSON lines, every fault."""
    folder = tmp_path_factory.mktemp("generated")
    paths = []
    for fmt in ("claude_code", "openclaw", "codex"):
        for seed, rate in ((3, 0.3), (4, 0.9)):
            out = folder / f"{fmt}-{seed}.jsonl"
            argv = [sys.executable, str(GENERATOR), "--format", fmt, "--records", "600"]
            argv += ["--seed", str(seed), "--fault-rate", str(rate), "--parallel-rate", "0.3"]
            argv += ["--result-bytes", "20:400", "--out", str(out)]
            subprocess.run(argv, check=True, capture_output=True)
            paths.append(out)
    return paths


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_generated_sessions_repair_streamed_as_whole(
    generated: list[Path], policy: str, tmp_path: Path
) -> None:
    for path in generated:
        _assert_same(path, policy, tmp_path)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["claude_code", "openclaw", "codex"]),
    script=sessions.scripts(),
    policy=st.sampled_from(sorted(PRESETS)),
    ending=st.sampled_from([b"", b"\n", b"\r\n", b"\n\n", b"\r"]),
)
def test_scripted_sessions_repair_streamed_as_whole(
    tmp_path: Path, name: str, script: sessions.Script, policy: str, ending: bytes
) -> None:
    data = getattr(sessions, name)(script).rstrip(b"\n") + ending
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    _assert_same(path, policy, tmp_path)


def test_a_copy_into_a_pipe_is_read_and_written(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"0123456789" * 1000)
    read, write = os.pipe()
    with FileSource(path) as source, open(write, "wb") as out:
        source.copy_to(out, 5, 9005)
    with open(read, "rb") as f:
        assert f.read() == (b"0123456789" * 1000)[5:9005]


def test_a_copy_lands_after_what_was_written_before(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"abcdefghij" * 500)
    target = tmp_path / "out"
    with FileSource(path) as source, open(target, "wb") as out:
        out.write(b"head:")  # still in the buffer when the copy starts
        source.copy_to(out, 10, 30)
        out.write(b":mid:")
        source.copy_to(out, 0, 5)
        source.copy_to(out, 4990, 99999)  # past the end: only what there is
    assert target.read_bytes() == b"head:" + b"abcdefghij" * 2 + b":mid:abcde" + b"abcdefghij"


def test_a_copy_into_a_file_opened_to_append_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"xyz" * 100)
    target = tmp_path / "out"
    target.write_bytes(b"old;")
    with FileSource(path) as source, open(target, "ab") as out:
        source.copy_to(out, 0, 300)
    assert target.read_bytes() == b"old;" + b"xyz" * 100


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# Lines whose values the previews would read and the streamed path may skip: each must
# cost the record (or the file) exactly what it costs with previews.
HOSTILE_CLAUDE = [
    b'{"type":"assistant","uuid":"h1","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"assistant","id":"m","content":[{"type":"text","text":' + _deep(1000) + b"}]}}",
    b'{"type":"assistant","uuid":"h2","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"assistant","id":"m","content":[{"type":' + _deep(900) + b"}]}}",
    b'{"type":"user","uuid":"h3","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"user","content":[{"type":"text","text":{"x":[1,2,{"y":null}]}}]}}',
    b'{"type":"user","uuid":"h4","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"user","content":"nul \\u0000 lone \\ud800 \\udfff end"}}',
    b'{"type":"assistant","uuid":"h5","parentUuid":"P","sessionId":"s","message":{"role":'
    b'"assistant","id":"m","content":[{"type":"tool_use","id":"t","name":' + _deep(950) + b"}]}}",
    b'{"type":"user","uuid":"h6","uuid":"h6b","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"user","content":[{"type":"text","text":123456789012345678901234567890}]}}',
    b'{"type":"user","uuid":"h7","parentUuid":"P","message":{"role":"user","content":"\xff\xfe"}}',
    b'{"type":"user","uuid":"h8","parentUuid":"P","message":{"role":"user","content":"'
    + b"a " * 5000
    + b'"}}',
    b'\xef\xbb\xbf{"type":"user","uuid":"h9","parentUuid":"P","message":{"role":"user",'
    b'"content":"a BOM inside the file"}}',
    # Lone surrogate escapes (a Node string cut mid-pair): valid JSON to the agent.
    b'{"type":"user","uuid":"h10","parentUuid":"P","sessionId":"s","message":{"role":"user",'
    b'"content":[{"type":"tool_result","tool_use_id":"toolu_01AAAAAAAAAAAAAAAAAAAAAA",'
    b'"content":"1 failed \\ud83d"}]}}',
    b'{"type":"assistant","uuid":"h11\\udc00","parentUuid":"P","sessionId":"s","message":'
    b'{"role":"assistant","id":"m\\ud800","content":[{"type":"text","text":"cut \\udbff"},'
    b'{"type":"tool_use","id":"toolu_\\udfff","name":"Bash","input":{"c":"\\ud83d"}}]}}',
]
HOSTILE_OPENCLAW = [
    b'{"type":"message","id":"h1","parentId":"P","message":{"role":"assistant","content":'
    b'[{"type":"text","text":' + _deep(1000) + b"}]}}",
    b'{"type":"message","id":"h2","parentId":"P","message":{"role":"user","content":'
    + _deep(1000)
    + b"}}",
    b'{"type":"message","id":"h3","parentId":"P","message":{"role":"user","content":'
    b'"nul \\u0000 \\ud800"}}',
    b'{"type":"message","id":"h4","parentId":"P","message":{"role":"assistant","content":'
    b'[{"type":' + _deep(900) + b"}]}}",
    b'{"type":"message","id":"h5","parentId":"P","message":{"role":"assistant","content":'
    b'"text as a string", "stopReason":"aborted"}}',
    b'{"type":"message","id":"h6","parentId":"P","message":{"role":"toolResult",'
    b'"toolCallId":"toolu_01PPPPPPPPPPPPPPPPPPPPPP","content":' + _deep(1000) + b"}}",
    b'{"type":"message","id":"h7\\ud83d","parentId":"P","message":{"role":"toolResult",'
    b'"toolCallId":"toolu_01PPPPPPPPPPPPPPPPPPPPPP\\udc00","content":[{"type":"text",'
    b'"text":"cut \\ud83d"}]}}',
]

# Where the streamed path reads less than a preview: a result's text is previewed only
# when its first characters could begin an earlier repair's marker, a tool name's check
# is remembered, short arguments are digested from orjson's bytes.
_MARKER = b"[openclaw] " + OPENCLAW_SENTENCE.encode()
_MARKERS = [
    b'"' + b" " * 40 + _MARKER + b'"',
    b'"\\n\\t ' + _MARKER + b'"',
    b'[{"type":"text","text":""},{"type":"text","text":"' + _MARKER + b'"}]',
    b'[{"type":"text","text":"'
    + b"  \\n" * 20
    + b'"},{"type":"text","text":"No result provided"}]',
    b'[{"type":"image","source":{}},{"type":"text","text":"aborted"}]',
    b'"aborted"',
    b'"  Skipped due to queued user message."',
    b'"{ \\"ok\\": false, \\"error\\": \\"interrupted\\" }"',
    b'"[Tool result missing due to internal error]"',
    b'"Not a marker"',
    b'{"text":"No result provided"}',
    b'[{"type":"text","text":"\\u00a0\\u2003aborted"}]',
]
_ARGS = [
    b'{"q":"' + "é".encode() * 150 + b'"}',
    b'{"q":"' + "日".encode() * 100 + b'"}',
    b'{"q":"' + b"x" * 232 + b'"}',
    b'{"q":"' + b"x" * 233 + b'"}',
    b'{"b":1,"a":[1.5,-0,1e300,null]}',
    b'"{\\"cut\\": "',
    b"null",
]
_NAMES = [b'"bad name!"', b'"bad name!"', b'"Bash\\n"', b'" "', b"null", b'"' + b"n" * 65 + b'"']
HOSTILE_CLAUDE += (
    [
        b'{"type":"user","uuid":"m%d","parentUuid":"P","sessionId":"s","message":{"role":"user",'
        b'"content":[{"type":"tool_result","tool_use_id":"toolu_m%d","content":%s}]}}'
        % (k, k, text)
        for k, text in enumerate(_MARKERS)
    ]
    + [
        b'{"type":"assistant","uuid":"a%d","parentUuid":"P","sessionId":"s","message":{"role":'
        b'"assistant","id":"m","content":[{"type":"tool_use","id":"toolu_a%d","name":%s,'
        b'"input":%s}]}}' % (k, k, name, args)
        for k, (name, args) in enumerate(
            [(b'"Bash"', args) for args in _ARGS] + [(name, b"{}") for name in _NAMES]
        )
    ]
    + [
        b'{"type":"assistant","uuid":"b1","parentUuid":"P","sessionId":"s","message":{"role":'
        b'"assistant","id":"m","content":[{"type":"tool_use","id":" ","name":"Bash","input":{}},'
        b'{"type":"tool_use","id":"toolu_b1","name":"Bash"}]}}',
    ]
)
HOSTILE_OPENCLAW += (
    [
        b'{"type":"message","id":"r%d","parentId":"P","message":{"role":"toolResult",'
        b'"toolCallId":"toolu_r%d","content":%s}}' % (k, k, text)
        for k, text in enumerate(_MARKERS)
    ]
    + [
        b'{"type":"message","id":"c%d","parentId":"P","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"toolu_c%d","name":%s,"arguments":%s}]}}' % (k, k, name, args)
        for k, (name, args) in enumerate(
            [(b'"read"', args) for args in _ARGS] + [(name, b"{}") for name in _NAMES]
        )
    ]
    + [
        b'{"type":"message","id":"p1","parentId":"P","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"toolu_p1","name":"read","arguments":"{\\"pa","partialJson":1}]}}',
        b'{"type":"message","id":"u1","parentId":"P","message":{"role":"user","content":'
        b'[{"type":"text","text":"a"},{"type":"image","data":"x"}]}}',
        b'{"type":"message","id":"u2","parentId":"P","message":{"role":"user","content":'
        b'[{"type":"text","text":{"x":[1,{"y":2}]}}]}}',
    ]
)


@pytest.mark.parametrize("policy", ["synthesize", "discard"])
@pytest.mark.parametrize(
    ("sample", "line"),
    [("claude_code.jsonl", line) for line in HOSTILE_CLAUDE]
    + [("openclaw.jsonl", line) for line in HOSTILE_OPENCLAW],
    ids=lambda v: v if isinstance(v, str) else repr(v[:40] + v[-20:])[:70],
)
def test_a_hostile_line_costs_the_same_streamed_as_whole(
    sample: str, line: bytes, policy: str, tmp_path: Path
) -> None:
    lines = (ROOT / "demo" / "samples" / "formats" / sample).read_bytes().splitlines(True)
    for at in (3, len(lines) - 1):
        path = tmp_path / sample
        path.write_bytes(b"".join([*lines[:at], line + b"\n", *lines[at:]]))
        _assert_same(path, policy, tmp_path)


# Empty strings where ids go: kept as "" (not taken for a missing id) on both paths.
EMPTY_IDS = [
    b'{"type":"user","sessionId":"s","uuid":"","parentUuid":"P","message":'
    b'{"role":"user","content":"last"}}',
    b'{"type":"user","sessionId":"s","uuid":"e2","parentUuid":"","message":'
    b'{"role":"user","content":"parent empty"}}',
    b'{"type":"assistant","sessionId":"s","uuid":"e3","parentUuid":"P","message":{"id":"",'
    b'"role":"assistant","content":[{"type":"tool_use","id":"t_e3","name":"ls","input":{}}]}}',
]
EMPTY_OPENCLAW = [
    b'{"type":"label","id":"","parentId":"P"}',
    b'{"type":"message","id":"","parentId":"P","message":{"role":"user","content":"x"}}',
    b'{"type":"message","id":"e2","parentId":"","message":{"role":"user","content":"y"}}',
]


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize(
    ("sample", "line"),
    [("claude_code.jsonl", line) for line in EMPTY_IDS]
    + [("openclaw.jsonl", line) for line in EMPTY_OPENCLAW],
    ids=lambda v: v if isinstance(v, str) else repr(v[20:70]),
)
def test_an_empty_id_reads_the_same_streamed_as_whole(
    sample: str, line: bytes, policy: str, tmp_path: Path
) -> None:
    lines = (ROOT / "demo" / "samples" / "formats" / sample).read_bytes().splitlines(True)
    for at in (1, 3, len(lines)):
        path = tmp_path / sample
        path.write_bytes(b"".join([*lines[:at], line + b"\n", *lines[at:]]))
        _assert_same(path, policy, tmp_path)


def test_a_last_line_ending_in_a_bare_carriage_return_reads_the_same(tmp_path: Path) -> None:
    lines = (ROOT / "demo" / "samples" / "formats" / "claude_code.jsonl").read_bytes()
    for cut in (b"", b"x"):
        path = tmp_path / "cr.jsonl"
        path.write_bytes(lines.rstrip(b"\n")[: len(lines) - 2 - len(cut)] + cut + b"\r")
        for policy in ("synthesize", "discard"):
            _assert_same(path, policy, tmp_path)


# A lone surrogate escape where a repair reads it: the tool result, the orphaned call's id,
# the uuid a synthetic record's id derives from, a line the repair rewrites.
LONE_SURROGATE = {
    "result": lone_surrogate.session(),
    "orphan id": lone_surrogate.session().replace(
        b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", b"toolu_01C\\ud83dCC"
    ),
    "orphan uuid": lone_surrogate.session().replace(
        b"aaaaaaaa-0000-4000-8000-000000000008", b"aaaaaaaa-\\ud83d-8"
    ),
    "rewritten": lone_surrogate.with_text_before_call(),
}


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("case", sorted(LONE_SURROGATE))
def test_a_lone_surrogate_repairs_streamed_as_whole(case: str, policy: str, tmp_path: Path) -> None:
    lines = LONE_SURROGATE[case].splitlines(True)
    # Long enough that the store reads the lines after the first ones straight.
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b"".join(lines[:1] + lines[1:] * 6))
    _assert_same(path, policy, tmp_path)
    repaired = analyze(path.read_bytes(), path.name, policy).repaired.decode("utf-8")
    # The tool result's escape is in every copy of its line, whatever else the repair did.
    assert repaired.count(lone_surrogate.CUT.decode()) == 6


FIELDS = [
    *("index", "start", "end", "line", "role", "kind", "calls", "results", "other_blocks"),
    *("text", "uid", "parent", "message_id", "timestamp", "boundary", "keep_from"),
    *("sidechain", "aborted", "interrupted", "inactive", "leads", "attached"),
    *("relinked_from", "error"),
]


def _records(path: Path) -> list[dict[str, object]]:
    with FileSource(path) as source:
        records = formats.load(source, path.name, summaries=False).records
        return [{name: getattr(r, name) for name in FIELDS} for r in records]


def _assert_stored_as_classified(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Assert the lines `Format.store_line` reads are the records classifying them gives."""
    try:
        fast = _records(path)
    except formats.FormatError:
        return
    with monkeypatch.context() as patch:
        for fmt in formats.FORMATS.values():
            patch.setattr(type(fmt), "stores_lines", False)
        assert _records(path) == fast


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_jsonl_file_stores_its_lines_as_classified(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_stored_as_classified(path, monkeypatch)


def test_generated_sessions_store_their_lines_as_classified(
    generated: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for path in generated:
        _assert_stored_as_classified(path, monkeypatch)


@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_nearly_every_message_line_is_stored_straight(
    generated: list[Path], fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = type(formats.FORMATS[fmt])
    stored = []
    original = kind.store_line

    def counted(self: Any, obj: dict[str, Any], *args: Any) -> bool:
        stored.append(original(self, obj, *args))
        return stored[-1]

    monkeypatch.setattr(kind, "store_line", counted)
    monkeypatch.setattr(linescan, "SCANNERS", {})  # every line through `store_line`
    monkeypatch.setattr(linescan, "APPENDERS", {})
    monkeypatch.setattr(linescan, "LINES_APPENDERS", {})
    for path in generated:
        if path.name.startswith(fmt):
            _records(path)
    assert len(stored) > 1000 and sum(stored) / len(stored) > 0.9


@pytest.mark.skipif(not linescan.SCANNERS, reason="built without a C compiler")
@pytest.mark.parametrize("fmt", ["claude_code", "openclaw"])
def test_nearly_every_message_line_is_appended_by_the_c_scanner(
    generated: list[Path], fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    append, append_lines = linescan.APPENDERS[fmt], linescan.LINES_APPENDERS[fmt]
    appended = []

    def counted(*args: Any) -> Any:
        appended.append(append(*args))
        return appended[-1]

    monkeypatch.setitem(linescan.APPENDERS, fmt, counted)
    monkeypatch.setattr(linescan, "LINES_APPENDERS", {})  # line by line, to count them
    for path in generated:
        if path.name.startswith(fmt):
            _records(path)
    covered = sum(found is not None for found in appended)
    assert len(appended) > 1000 and covered / len(appended) > 0.9
    # A chunk's lines at once: the same lines, each taken once.
    taken = []

    def counted_lines(store: Any, chunk: bytes, pos: int, offset: int, line_no: int) -> Any:
        found = append_lines(store, chunk, pos, offset, line_no)
        taken.append(found[2] - line_no)
        return found

    monkeypatch.setattr(linescan, "LINES_APPENDERS", {fmt: counted_lines})
    appended.clear()
    for path in generated:
        if path.name.startswith(fmt):
            _records(path)
    # The same lines as one by one: those not whole in a chunk go one by one still.
    assert sum(taken) + sum(found is not None for found in appended) == covered
    assert sum(taken) > 0.8 * covered


@pytest.mark.parametrize(
    ("sample", "line"),
    [("claude_code.jsonl", line) for line in HOSTILE_CLAUDE]
    + [("openclaw.jsonl", line) for line in HOSTILE_OPENCLAW],
    ids=lambda v: v if isinstance(v, str) else repr(v[:40] + v[-20:])[:70],
)
def test_a_hostile_line_is_stored_as_classified(
    sample: str, line: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (ROOT / "demo" / "samples" / "formats" / sample).read_bytes().splitlines(True)
    # Past the lines sniffed one by one: where the store takes lines straight.
    body = lines[:3] + lines[3:] * 20
    path = tmp_path / sample
    path.write_bytes(b"".join([*body, line + b"\n", *lines[3:]]))
    # Too deep to read either way: `analyze` says so (test_a_hostile_line_costs_the_same...).
    with contextlib.suppress(RecursionError):
        _assert_stored_as_classified(path, monkeypatch)


def _compacted(kept: str, *, twice: bool = False, copies: int = 1) -> bytes:
    """Return an OpenClaw session compacted to keep from entry `kept`, its result line copied."""
    lines = (ROOT / "tests" / "agents" / "sessions" / "compaction-orphan.jsonl").read_bytes()
    head, *body = lines.splitlines(True)
    body = [
        line.replace(b'"d0000003"', b'"' + kept.encode() + b'"', 1)
        if b'"type":"compaction"' in line
        else line
        for line in body
    ]
    body[2:3] = body[2:3] * copies  # the kept entry's line, logged more than once
    if twice:
        body += [line.replace(b"d00000", b"e00000") for line in body]
    return head + b"".join(body)


COMPACTED = {
    "kept": _compacted("d0000003"),
    "kept logged twice": _compacted("d0000003", copies=2),
    "kept unknown": _compacted("d0000099"),
    "kept the compaction's parent": _compacted("d0000004", copies=3),
    "two compactions": _compacted("d0000003", twice=True),
}


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("case", sorted(COMPACTED))
def test_a_compacted_session_repairs_streamed_as_whole(
    case: str, policy: str, tmp_path: Path
) -> None:
    path = tmp_path / "compacted.jsonl"
    path.write_bytes(COMPACTED[case])
    _assert_same(path, policy, tmp_path)


def test_a_result_on_another_branch_written_content_first_repairs_streamed_as_whole(
    tmp_path: Path,
) -> None:
    """A toolResult off the branch pi resumes, its content written before its role.

    Its content holds a `toolCall` block. Read whole, the entry is a result,
    and no fault is found. Streamed, the C scanner took that block for a call
    of the entry, the entry for no answer, and the repair wrote a synthetic
    result into the file.
    """
    lines = (ROOT / "demo" / "samples" / "formats" / "openclaw.jsonl").read_bytes().splitlines(True)
    user = (
        b'{"type":"message","id":"%s","parentId":"%s","message":{"role":"user","content":"hi"}}\n'
    )
    # Past the lines sniffed whole, so that the scanner reads the result.
    before = [user % (b"g%03d" % k, b"g%03d" % (k - 1) if k else b"a0000002") for k in range(60)]
    call = lines[3].replace(b'"parentId":"a0000002"', b'"parentId":"g059"')
    result = (
        b'{"type":"message","id":"a0000004","parentId":"a0000003","message":{"content":'
        b'[{"type":"toolCall","id":"toolu_X","name":"read","arguments":{}}],'
        b'"role":"toolResult","toolCallId":"toolu_01PPPPPPPPPPPPPPPPPPPPPP","isError":false}}\n'
    )
    # The branch pi resumes goes on from the call without the result.
    after = [user % (b"f%03d" % k, b"f%03d" % (k - 1) if k else b"a0000003") for k in range(20)]
    path = tmp_path / "openclaw.jsonl"
    path.write_bytes(b"".join([*lines[:3], *before, call, result, *after]))
    assert analyze(path.read_bytes(), path.name, "synthesize").fault_counts == {}
    for policy in ("synthesize", "discard"):
        _assert_same(path, policy, tmp_path)
