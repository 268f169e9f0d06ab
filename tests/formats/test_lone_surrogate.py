"""A lone surrogate escape is valid JSON to the agents (Node's JSON.parse): Pairfix reads it.

orjson refuses `"\\ud83d"` with no low half after it; Python's `json` and Node's
`JSON.parse` read it as a lone surrogate code point. A line holding one is an
ordinary record: its faults are detected, and it is copied verbatim or, when a
repair rewrites it, written with the same escape.
"""

from __future__ import annotations

import json

import orjson
import pytest

from tests import lone_surrogate
from transcripts import formats
from transcripts.cli import main
from transcripts.core import jsontext
from transcripts.core.policy import PRESETS
from transcripts.engine import analyze

HALF = "\ud83d"
ORPHAN_ID = lone_surrogate.session().replace(
    b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", b"toolu_01C\\ud83dCC"
)


def test_orjson_refuses_what_the_stdlib_reads() -> None:
    line = b'{"content":"abc\\ud83d"}'
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(line)
    assert json.loads(line) == {"content": "abc" + HALF}
    assert jsontext.loads(line) == {"content": "abc" + HALF}
    assert jsontext.loads(line.decode()) == {"content": "abc" + HALF}


@pytest.mark.parametrize(
    "bad",
    [
        b'{"content":"abc\\ud83d",}',  # a trailing comma as well
        b'{"content":"abc\\ud83d","n":NaN}',  # NaN: JSON.parse refuses it, so does orjson
        b'{"content":"abc\\ud83d","n":Infinity}',
        b'{"content":"abc\\ud83d \xff"}',  # invalid UTF-8 as well
        b'{"content":"abc\\\\ud83d\x01"}',  # an escaped backslash, then a raw control
        # Infinite as a double: the stdlib would read it as inf and a repair write Infinity.
        b'{"content":"abc\\ud83d","cost":1e400}',
        b'{"content":"path C:\\\\ud83d","cost":-1e400}',  # no lone surrogate at all
    ],
)
def test_what_else_orjson_refuses_it_still_refuses_with_its_own_message(bad: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError) as caught:
        jsontext.loads(bad)
    with pytest.raises(orjson.JSONDecodeError) as direct:
        orjson.loads(bad)
    assert caught.value.msg == direct.value.msg


def test_a_number_reads_as_orjson_reads_it_where_the_stdlib_reads_the_line() -> None:
    value = jsontext.loads(
        b'{"t":"\\ud83d","big":12345678901234567890123,"n":-7,"u":18446744073709551615}'
    )
    assert value == {
        "t": "\ud83d",
        "big": 1.2345678901234568e22,
        "n": -7,
        "u": 18446744073709551615,
    }
    assert isinstance(value["big"], float)


def test_the_faults_are_exactly_the_sessions_own() -> None:
    plain = analyze(lone_surrogate.SAMPLE.read_bytes(), "s.jsonl", "synthesize")
    cut = analyze(lone_surrogate.session(), "s.jsonl", "synthesize")
    assert [(f.kind.value, f.record) for f in cut.faults] == [("missing_result", 8)]
    assert [(f.kind, f.record, f.tool_call_id) for f in cut.faults] == [
        (f.kind, f.record, f.tool_call_id) for f in plain.faults
    ]
    result = cut.transcript.records[5].results[0]
    assert result.tool_call_id == "toolu_01AAAAAAAAAAAAAAAAAAAAAA"
    assert result.text == "1 failed, 9 " + HALF


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_every_preset_keeps_the_surrogate_line_byte_for_byte(policy: str) -> None:
    data = lone_surrogate.session()
    line = data.splitlines(True)[5]
    assert lone_surrogate.CUT in line
    analysis = analyze(data, "s.jsonl", policy)
    assert analysis.error is None
    assert line in analysis.repaired.splitlines(True)
    # Nothing before the line is cut off the chain: the repaired file checks clean.
    again = analyze(analysis.repaired, "s.jsonl", policy)
    assert [f.kind.value for f in again.faults if f.kind.value != "existing_synthetic"] == []
    assert [r.error for r in again.transcript.records if r.error is not None] == []


def test_a_line_the_repair_rewrites_keeps_its_escape() -> None:
    data = lone_surrogate.with_text_before_call()
    analysis = analyze(data, "s.jsonl", "discard")
    # The orphaned call is dropped; its text block, with `\udc00`, is kept.
    assert [op.kind.value for op in analysis.plan.ops] == ["drop_call"]
    rewritten = [line for line in analysis.repaired.splitlines() if b"cut \\udc00 here" in line]
    assert len(rewritten) == 1
    assert b"toolu_01CCCCCCCCCCCCCCCCCCCCCC" not in rewritten[0]
    assert json.loads(rewritten[0])["message"]["content"] == [
        {"type": "text", "text": "cut \udc00 here"}
    ]
    assert analysis.repaired.decode("utf-8")  # no surrogate written raw (not UTF-8)
    assert analyze(analysis.repaired, "s.jsonl", "discard").faults == []


def test_a_lone_surrogate_in_a_tool_use_id_is_an_id_anthropic_refuses() -> None:
    data = lone_surrogate.session().replace(
        b'"toolu_01AAAAAAAAAAAAAAAAAAAAAA"', b'"toolu_01A\\udc00AAAA"'
    )
    analysis = analyze(data, "s.jsonl", "synthesize")
    kinds = [(f.kind.value, f.record, f.tool_call_id) for f in analysis.faults]
    assert kinds == [
        ("malformed_call", 4, "toolu_01A\udc00AAAA"),
        ("missing_result", 8, "toolu_01CCCCCCCCCCCCCCCCCCCCCC"),
    ]
    # Renamed in the call and in its result; the result's content keeps its escape.
    lines = analysis.repaired.splitlines()
    assert b'"id":"toolu_01A_AAAA"' in lines[4]
    assert b'"tool_use_id":"toolu_01A_AAAA"' in lines[5] and lone_surrogate.CUT in lines[5]
    assert analyze(analysis.repaired, "s.jsonl", "synthesize").faults == []


def test_a_lone_surrogate_in_a_uuid_still_links_the_chain() -> None:
    uuid = b'"aaaaaaaa-0000-4000-8000-000000000006"'
    data = lone_surrogate.session().replace(uuid, b'"aaaaaaaa-\\udbff-6"')
    assert data.count(b'"aaaaaaaa-\\udbff-6"') == 2  # the record's uuid, its child's parent
    analysis = analyze(data, "s.jsonl", "synthesize")
    assert [(f.kind.value, f.record) for f in analysis.faults] == [("missing_result", 8)]
    assert analysis.transcript.records[6].uid == "aaaaaaaa-\udbff-6"
    assert analysis.transcript.records[7].parent == "aaaaaaaa-\udbff-6"
    assert data.splitlines()[6] in analysis.repaired.splitlines()


def test_the_check_report_names_the_sessions_own_faults(tmp_path, capsys) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(lone_surrogate.session())
    assert main(["check", "--json", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    faults = report["files"][0]["faults"]
    assert [(f["kind"], f["record"]) for f in faults] == [("missing_result", 8)]


def test_reports_write_an_id_holding_a_lone_surrogate_as_the_file_does(tmp_path, capsys) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(ORPHAN_ID)
    assert main(["check", "--json", str(path)]) == 1
    out = capsys.readouterr().out
    assert '"tool_call_id": "toolu_01C\\ud83dCC"' in out
    faults = json.loads(out)["files"][0]["faults"]
    assert [(f["kind"], f["tool_call_id"]) for f in faults] == [
        ("malformed_call", "toolu_01C\ud83dCC"),
        ("missing_result", "toolu_01C\ud83dCC"),
    ]
    assert main(["preview", "--json", str(path)]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["valid"] is True
    assert [d["tool_call_id"] for d in preview["dropped"]] == ["toolu_01C\ud83dCC"]
    assert [m["role"] for m in preview["messages"]][:2] == ["user", "assistant"]


def test_a_document_element_with_a_lone_surrogate_is_read_whole_and_streamed() -> None:
    messages = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "files: a b " + HALF},
    ]
    for data in (
        json.dumps(messages).encode(),  # one line: read bracket by bracket
        ("[\n" + ",\n".join(json.dumps(m) for m in messages) + "\n]\n").encode(),
    ):
        assert b"\\ud83d" in data
        loaded = formats.load(data, "chat.json")
        assert loaded.format == "openai_chat"
        assert [r.error for r in loaded.records] == [None, None, None]
        analysis = analyze(data, "chat.json", "synthesize")
        assert [(f.kind.value, f.tool_call_id) for f in analysis.faults] == [
            ("missing_result", "call_2")
        ]
        assert json.loads(analysis.repaired)[2]["content"] == "files: a b " + HALF
        assert b"\\ud83d" in analysis.repaired
