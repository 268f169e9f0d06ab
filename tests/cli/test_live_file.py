"""A session still being written: its last call's tool may be running, so that call is pending.

DESIGN contract 9. Answered with a synthetic result, the real result would land
after it as a duplicate when the tool finishes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SESSION = Path(__file__).parents[1] / "agents" / "sessions" / "claude_code_ends_with_prompt.jsonl"
PAIRFIX = str(Path(sys.executable).with_name("pairfix"))


def _with_a_call_in_flight(path: Path) -> Path:
    lines = SESSION.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    live = json.loads(json.dumps(next(r for r in records if r.get("type") == "assistant")))
    live.update(uuid="live-1", parentUuid=records[-1].get("uuid"))
    live["message"] = {
        **live["message"],
        "id": "msg_live",
        "content": [
            {"type": "tool_use", "id": "toolu_LIVE", "name": "Bash", "input": {"command": "x"}}
        ],
    }
    path.write_text("\n".join(lines) + "\n" + json.dumps(live) + "\n")  # written just now
    return path


def _pairfix(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PAIRFIX, *argv], capture_output=True, text=True, check=False)


def test_a_call_in_flight_is_pending_and_left_alone(tmp_path: Path) -> None:
    path = _with_a_call_in_flight(tmp_path / "s.jsonl")
    report = json.loads(_pairfix("check", "--json", str(path)).stdout)
    assert [(f["kind"], f["tool_call_id"]) for f in report["files"][0]["faults"]] == [
        ("pending_result", "toolu_LIVE")
    ]
    done = _pairfix("fix", "--in-place", str(path))
    assert "they are pending and left alone (--grace 0 once the agent has stopped)" in done.stderr
    # Not fixed: resumed now it would be refused, as `check` says (exit 1, not 0).
    assert (done.returncode, "left as it was") == (1, done.stdout.split("; ")[-1].strip())
    copied = _pairfix("fix", str(path), "--out", str(tmp_path / "out"))
    assert copied.returncode == 1 and (tmp_path / "out" / "s.jsonl").exists()
    # A dry run says the same: nothing to write, and a file the provider would refuse now.
    planned = _pairfix("fix", "--dry-run", str(path))
    assert (planned.returncode, planned.stdout.count("pending_result=1")) == (1, 1)
    assert "toolu_LIVE" not in "".join(
        line for line in path.read_text().splitlines() if '"tool_result"' in line
    )


def test_grace_0_or_an_old_file_repairs_the_call(tmp_path: Path) -> None:
    path = _with_a_call_in_flight(tmp_path / "s.jsonl")
    done = _pairfix("check", "--grace", "0", str(path))
    assert "missing_result toolu_LIVE" in done.stdout
    hour_ago = path.stat().st_mtime - 3600
    os.utime(path, (hour_ago, hour_ago))
    assert "missing_result toolu_LIVE" in _pairfix("check", str(path)).stdout


def test_a_json_document_written_just_now_is_repaired(tmp_path: Path) -> None:
    # One JSON document is written whole, never appended to: nothing is in flight.
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "f", "arguments": "{}"}}]},
            ]
        )
    )  # fmt: skip
    assert "missing_result call_1" in _pairfix("check", str(path)).stdout


def test_a_policy_that_answers_running_calls_says_so(tmp_path: Path) -> None:
    # openmaic imitates a read-time repair that cannot tell a running call: the note says so.
    path = _with_a_call_in_flight(tmp_path / "s.jsonl")
    done = _pairfix("fix", "--policy", "openmaic", "--dry-run", str(path))
    assert "left alone" not in done.stderr
    assert (
        "may still be running: the openmaic policy answers them all the same "
        "(openmaic: pending_result -> synthesize)"
    ) in done.stderr
    assert "insert_result toolu_LIVE" in done.stdout
