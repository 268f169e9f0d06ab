"""Transcript content is untrusted: it renders escaped, and cannot reorder what it shows."""

from __future__ import annotations

import json


def _chat(call_id: str, name: str, text: str) -> bytes:
    return json.dumps(
        [
            {"role": "user", "content": text},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": "{}"},
                    }
                ],
            },
        ]
    ).encode()


def test_it_escapes_markup_and_spells_out_bidi_controls(alice_client, workspace, ingest):
    data = _chat(
        "call_1\u202e", "<script>alert(3)</script>", "\u202egnp.exe <img src=x onerror=alert(1)>"
    )
    session = ingest(workspace, "hostile.json", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "<script>alert(3)" not in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "\u202e" not in html
    assert "[U+202E]gnp.exe" in html
    assert "call_1[U+202E]" in html


def test_the_page_and_its_fragment_are_cached_apart(alice_client, workspace, ingest):
    session = ingest(workspace, "chat.json", _chat("call_1", "run", "hi"))
    response = alice_client.get(session.get_absolute_url())
    assert "HX-Request" in response["Vary"]
