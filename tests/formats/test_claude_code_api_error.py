"""Claude Code's line for a failed request is shown, never sent: it takes no part in pairing."""

from __future__ import annotations

import json

from transcripts.core.model import Role
from transcripts.engine import analyze
from transcripts.formats import load


def _line(uuid: str, parent: str | None, kind: str, content: object, **extra: object) -> str:
    message: dict = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id="msg_" + uuid, model=extra.pop("model", "claude-sonnet-4-5"))
    line = {"parentUuid": parent, "sessionId": "s", "type": kind, "message": message, "uuid": uuid}
    return json.dumps({**line, **extra}) + "\n"


def test_an_api_error_line_between_a_call_and_its_result_is_no_turn() -> None:
    error = [{"type": "text", "text": "API Error: 500 overloaded"}]
    call = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]
    data = (
        _line("u1", None, "user", "go")
        + _line("a1", "u1", "assistant", call)
        + _line("e1", "a1", "assistant", error, model="<synthetic>", isApiErrorMessage=True)
        + _line("r1", "e1", "user", result)
        + _line("a2", "r1", "assistant", [{"type": "text", "text": "done"}])
    ).encode()
    transcript = load(data, "s.jsonl")
    assert transcript.records[2].role == Role.META
    assert transcript.records[2].kind == "assistant/api_error"
    result_of = analyze(data, "s.jsonl")
    assert result_of.faults == []
    assert result_of.repaired == data
