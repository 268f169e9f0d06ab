"""Gemini API contents and Gemini CLI checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

from transcripts.core.policy import custom
from transcripts.core.validate import validate
from transcripts.engine import analyze
from transcripts.formats import load
from transcripts.replay import preview

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples"


def test_the_gemini_sample_orphan_is_answered_in_the_next_content() -> None:
    data = (SAMPLES / "formats" / "gemini.json").read_bytes()
    result = analyze(data, "gemini.json")
    assert result.format == "gemini"
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", "fc-0002", 3)
    ]
    contents = json.loads(result.repaired)["contents"]
    original = json.loads(data)["contents"]
    assert len(contents) == len(original)
    response, *rest = contents[4]["parts"]
    assert response["functionResponse"]["id"] == "fc-0002"
    assert response["functionResponse"]["name"] == "get_weather"
    assert "error" in response["functionResponse"]["response"]
    assert rest == original[4]["parts"]
    assert contents[:4] == original[:4]
    assert validate(load(result.repaired, "gemini.json")) == []
    assert not analyze(result.repaired, "gemini.json").plan


def test_the_checkpoint_sample_keeps_its_two_space_indent() -> None:
    data = (SAMPLES / "formats" / "gemini_cli_checkpoint.json").read_bytes()
    result = analyze(data, "checkpoint-demo.json", "native")
    assert result.format == "gemini_checkpoint"
    assert [str(f.kind) for f in result.faults] == ["missing_result"]
    repaired = json.loads(result.repaired)
    assert repaired["authType"] == json.loads(data)["authType"]
    last = repaired["history"][4]["parts"][0]["functionResponse"]
    assert last["response"] == {
        "error": "[Operation Cancelled] Reason: User did not allow tool call"
    }
    assert not analyze(result.repaired, "checkpoint-demo.json").plan


def test_responses_split_over_two_contents_are_merged_in_call_order() -> None:
    path = SAMPLES / "cases" / "15_gemini-parallel-responses-split.json"
    data = path.read_bytes()
    result = analyze(data, path.name)
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("displaced_result", "call_syn_ts_02", 3)
    ]
    assert "number of function response parts" in result.faults[0].error
    original = json.loads(data)
    contents = json.loads(result.repaired)["contents"]
    assert len(contents) == 4
    assert (
        contents[2]["parts"] == original["contents"][2]["parts"] + original["contents"][3]["parts"]
    )
    assert contents[3] == original["contents"][4]
    assert json.loads(result.repaired)["tools"] == original["tools"]
    assert validate(load(result.repaired, path.name)) == []


def test_calls_without_ids_pair_by_name_and_position() -> None:
    def call(city: str) -> dict:
        return {"functionCall": {"name": "weather", "args": {"city": city}}}

    def response(temp: int) -> dict:
        return {"functionResponse": {"name": "weather", "response": {"temp": temp}}}

    contents = [
        {"role": "user", "parts": [{"text": "two cities"}]},
        {"role": "model", "parts": [call("a"), call("b")]},
        {"role": "user", "parts": [response(1)]},
        {"role": "user", "parts": [{"text": "go on"}]},
    ]
    data = json.dumps({"contents": contents}, indent=2).encode()
    result = analyze(data, "g.json")
    assert [(str(f.kind), f.tool_call_id) for f in result.faults] == [
        ("missing_result", "@weather#1")
    ]
    repaired = json.loads(result.repaired)["contents"]
    added = repaired[2]["parts"][1]["functionResponse"]
    assert added["name"] == "weather"
    assert "id" not in added
    assert not analyze(result.repaired, "g.json").plan


CLI = SAMPLES / "formats" / "gemini_cli_session.jsonl"


def test_a_cli_session_reads_the_last_write_of_each_message() -> None:
    data = CLI.read_bytes()
    result = analyze(data, CLI.name)
    assert result.format == "gemini_cli"
    # m-0002 is written twice (executing, then success): only the last write counts.
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == [
        ("missing_result", "run_shell_command-1764662461000-bbbb", 7)
    ]


def test_a_cli_sessions_orphan_gets_its_result_on_the_call_itself() -> None:
    data = CLI.read_bytes()
    # Gemini CLI's own cancellation is the default in its own file; a policy with a text
    # of its own writes an error.
    receipt = custom("receipt", {"missing_result": "synthesize"}, "interrupted")
    for policy, status in [
        ("native", "cancelled"),
        ("synthesize", "cancelled"),
        (receipt, "error"),
    ]:
        result = analyze(data, CLI.name, policy)
        lines = result.repaired.splitlines()
        original = data.splitlines()
        assert len(lines) == len(original)
        assert [a == b for a, b in zip(lines, original, strict=True)].count(False) == 1
        call = json.loads(lines[7])["toolCalls"][0]
        assert call["status"] == status
        response = call["result"][0]["functionResponse"]
        assert response["id"] == "run_shell_command-1764662461000-bbbb"
        assert "error" in response["response"]
        assert not analyze(result.repaired, CLI.name, policy).plan


def test_a_rewind_drops_the_messages_from_its_target_on() -> None:
    lines = CLI.read_bytes().splitlines()
    data = b"\n".join([*lines, b'{"$rewindTo":"m-0005"}']) + b"\n"
    assert analyze(data, CLI.name).faults == []


def test_a_rewind_to_an_info_message_drops_it_and_what_follows() -> None:
    # The CLI's loader keeps every line with a string id in its Map, `info` messages too,
    # so a rewind to one drops the unanswered call written after it.
    lines = CLI.read_bytes().splitlines()
    info = (
        b'{"id":"m-0007","timestamp":"2025-12-02T08:01:00.500Z","type":"info",'
        b'"content":"Checkpoint saved."}'
    )
    data = b"\n".join([*lines[:7], info, lines[7], b'{"$rewindTo":"m-0007"}']) + b"\n"
    assert analyze(data, CLI.name).faults == []
    resumed = preview(load(data, CLI.name))
    assert resumed is not None and resumed.valid
    assert [m.texts for m in resumed.messages][-1] == ("Run the linter.",)
