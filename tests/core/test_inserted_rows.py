"""The row of a synthetic result names the role its message is written with."""

from __future__ import annotations

from pathlib import Path

import orjson

from transcripts.core.align import RowStatus
from transcripts.engine import analyze

SAMPLES = Path(__file__).resolve().parents[2] / "demo" / "samples" / "formats"


def inserted_roles(name: str) -> list[str]:
    analysis = analyze((SAMPLES / name).read_bytes(), name, policy="synthesize")
    return [
        row.right.role for row in analysis.rows if row.status is RowStatus.INSERTED and row.right
    ]


def test_a_claude_code_synthetic_result_row_is_a_user_line() -> None:
    analysis = analyze((SAMPLES / "claude_code.jsonl").read_bytes(), "s.jsonl")
    [inserted] = [orjson.loads(line) for line in analysis.repaired.splitlines()][-1:]
    assert inserted["type"] == "user"  # what Claude Code writes for a result, and the row says
    assert inserted_roles("claude_code.jsonl") == ["user"]


def test_an_openai_chat_synthetic_result_row_is_a_tool_message() -> None:
    assert inserted_roles("openai_chat.json") == ["tool"]
