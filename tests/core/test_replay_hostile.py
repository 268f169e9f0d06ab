"""The resume preview on records of shapes no agent writes: a refusal, never a crash."""

from __future__ import annotations

import json

import pytest

from transcripts import formats, replay
from transcripts.engine import analyze


def _lines(*objects: object) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


CODEX_META = {
    "timestamp": "2026-01-01T00:00:00Z",
    "type": "session_meta",
    "payload": {"id": "0199", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"},
}


def _codex_item(payload: dict[str, object]) -> dict[str, object]:
    return {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": payload}


HOSTILE = {
    # A response item whose type is an object, not a string.
    "codex-object-type.jsonl": _lines(CODEX_META, _codex_item({"type": {"x": 1}})),
    # A message whose content is a number.
    "codex-number-content.jsonl": _lines(
        CODEX_META, _codex_item({"type": "message", "role": "user", "content": 1.5})
    ),
    # A pi entry whose id is a list.
    "pi-list-id.jsonl": _lines(
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {
            "type": "message",
            "id": ["x"],
            "parentId": None,
            "message": {"role": "user", "content": "hi"},
        },
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_record_of_a_shape_the_agent_never_writes_gives_no_preview_and_no_crash(name):
    analysis = analyze(HOSTILE[name], name)
    assert analysis.transcript is not None, analysis.error
    for transcript in (
        analysis.transcript,
        formats.load(analysis.repaired, name, analysis.format),
    ):
        try:
            shown = replay.preview(transcript)
        except replay.CannotPreview as exc:
            assert "no resume preview" in str(exc)
        else:
            assert shown is not None
            assert all(isinstance(m, replay.Message) for m in shown.messages)
