"""What the timeline shows of a record: blocks read from the record's own bytes."""

import base64
import json
from collections import Counter
from pathlib import Path

import orjson
import pytest

from transcripts.core.model import POSITIONAL
from transcripts.engine import analyze
from transcripts.formats.display import (
    MAX_TEXT,
    PREVIEW_CHARS,
    PREVIEW_LINES,
    Shown,
    ShownKind,
    blocks,
    read_record,
    timestamp,
)

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Streams are refused; Cline's text results are paired by the parser but shown as the text they are.
FILES = sorted(
    p
    for p in [*SAMPLES.rglob("*"), *FIXTURES.rglob("*")]
    if p.suffix in (".json", ".jsonl")
    and ".expect" not in p.name
    and "stream_" not in p.name
    and p.parent.name != "cline_native_text_results"
)


def shown(kind, blocks_):
    return [b for b in blocks_ if b.kind is kind]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_it_shows_the_calls_and_results_the_parser_finds(path):
    data = path.read_bytes()
    analysis = analyze(data, path.name)
    assert analysis.transcript is not None
    for record in analysis.transcript.records:
        if record.error:
            continue
        seen = read_record(data[record.start : record.end])
        calls = Counter(b.tool_call_id for b in shown(ShownKind.CALL, seen))
        results = Counter(b.tool_call_id for b in shown(ShownKind.RESULT, seen))
        expected_calls = Counter(c.id for c in record.calls if not c.id.startswith(POSITIONAL))
        expected_results = Counter(
            r.tool_call_id for r in record.results if not r.tool_call_id.startswith(POSITIONAL)
        )
        assert expected_calls <= calls, (record.index, record.kind)
        assert expected_results <= results, (record.index, record.kind)
        names = {b.name for b in shown(ShownKind.CALL, seen)}
        assert {c.name for c in record.calls if c.name} <= names


def test_it_shows_a_calls_arguments_as_indented_json():
    [call] = blocks(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run", "arguments": '{"cmd":"ls","n":2}'},
                }
            ],
        }
    )
    assert call == Shown(
        ShownKind.CALL, '{\n  "cmd": "ls",\n  "n": 2\n}', name="run", tool_call_id="call_1"
    )


def test_it_shows_a_results_whole_content_and_error_flag():
    text = "\n".join(f"line {n}" for n in range(40))
    [result] = blocks(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": text}],
                    "is_error": True,
                }
            ],
        }
    )
    assert result.kind is ShownKind.RESULT
    assert result.text == text
    assert result.is_error
    assert result.line_count == 40
    assert result.preview == "\n".join(f"line {n}" for n in range(PREVIEW_LINES))
    assert result.is_cut


def test_a_short_block_is_not_cut():
    block = Shown(ShownKind.TEXT, "one\ntwo")
    assert block.preview == "one\ntwo"
    assert not block.is_cut


def test_a_long_line_is_cut_at_the_preview_length():
    block = Shown(ShownKind.TEXT, "x" * (PREVIEW_CHARS + 1))
    assert block.preview == "x" * PREVIEW_CHARS
    assert block.is_cut


def test_thinking_is_its_own_kind_in_every_spelling():
    found = blocks(
        [
            {"type": "thinking", "thinking": "plan A", "signature": "s"},
            {"type": "redacted_thinking", "data": "zzz"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan B"}]},
            {"text": "plan C", "thought": True},
            {"reasoningContent": {"reasoningText": {"text": "plan D"}}},
        ]
    )
    assert [(b.kind, b.text) for b in found] == [
        (ShownKind.THINKING, "plan A"),
        (ShownKind.THINKING, "(redacted)"),
        (ShownKind.THINKING, "plan B"),
        (ShownKind.THINKING, "plan C"),
        (ShownKind.THINKING, "plan D"),
    ]


PNG = b"\x89PNG\r\n\x1a\n" + bytes(992)  # 1,000 bytes


@pytest.mark.parametrize(
    "block",
    [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        },
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}},
        {"image": {"format": "png", "source": {"bytes": base64.b64encode(PNG).decode()}}},
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
    ],
    ids=["anthropic", "openai", "gemini", "bedrock", "openclaw"],
)
def test_an_image_is_a_placeholder_with_its_size(block):
    [image] = blocks([block])
    assert image == Shown(ShownKind.IMAGE, media_type="image/png", size=1000)


def test_an_image_inside_a_tool_result_follows_it():
    data = base64.b64encode(PNG).decode()
    found = blocks(
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {"type": "text", "text": "screenshot:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                },
            ],
        }
    )
    assert [(b.kind, b.text, b.size) for b in found] == [
        (ShownKind.RESULT, "screenshot:", None),
        (ShownKind.IMAGE, "", 1000),
    ]


def test_an_image_by_url_shows_the_url_as_text():
    [image] = blocks(
        [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]
    )
    assert image.kind is ShownKind.IMAGE
    assert image.text == "https://example.com/a.png"
    assert image.size is None


def test_bytes_that_are_not_json_come_back_raw():
    assert read_record(b'{"type":"user", oops \xff') == [
        Shown(ShownKind.RAW, '{"type":"user", oops \ufffd')
    ]


def test_a_huge_block_is_cut_with_a_note():
    [text] = blocks({"role": "user", "content": "y" * (MAX_TEXT + 10)})
    assert text.text.startswith("y" * MAX_TEXT)
    assert text.text.endswith("(10 more characters not shown)")


def test_nesting_beyond_the_limit_does_not_raise():
    deep: object = "bottom"
    for _ in range(5000):
        deep = {"content": [deep]}
    assert blocks(deep) == []


@pytest.mark.parametrize(
    "line, expected",
    [
        ({"timestamp": "2025-11-01T10:00:02.123Z"}, "2025-11-01 10:00:02"),
        ({"message": {"timestamp": 1764579602000}}, "2025-12-01 09:00:02"),
        ({"role": "user"}, ""),
        ([1, 2], ""),
    ],
)
def test_it_reads_when_a_record_was_written(line, expected):
    assert timestamp(orjson.dumps(line)) == expected


def test_an_unparsable_record_has_no_time():
    assert timestamp(b"{oops") == ""


def test_text_keeps_bidi_controls_for_the_template_to_spell_out():
    [text] = blocks({"role": "user", "content": "gnp\u202eexe"})
    assert text.text == "gnp\u202eexe"


def test_a_tool_message_of_result_parts_shows_each_result():
    found = blocks(
        json.loads(
            '{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"f",'
            '"output":{"type":"json","value":{"count":3}}}]}'
        )
    )
    assert found == [Shown(ShownKind.RESULT, '{\n  "count": 3\n}', name="f", tool_call_id="c1")]
