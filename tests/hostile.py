"""Hostile sessions: markup, script, foreign URLs, bidi controls, huge lines, deep nesting.

Every payload that would run, load or restyle something if it reached the
page unescaped sets `window.__pwned`, opens a dialog or asks for a URL on
`OTHER_ORIGIN`; the tests check that none of that happens and that the text
is still shown, escaped.
"""

from __future__ import annotations

import json

# Never reached: the browser test aborts every request that is not for the live server.
OTHER_ORIGIN = "http://other.invalid"

PAYLOADS = [
    "<script>window.__pwned = 1; alert('script')</script>",
    '"><img src=x onerror="window.__pwned = 2; alert(\'img\')">',
    '<svg onload="window.__pwned = 3"><circle onmouseover="alert(\'svg\')"/></svg>',
    "<a href=\"javascript:window.__pwned = 4\">click me</a> [md](javascript:alert('md'))",
    f'<img src="{OTHER_ORIGIN}/pixel.png"><iframe src="{OTHER_ORIGIN}/frame"></iframe>',
    f"</style><style>body {{ background: url({OTHER_ORIGIN}/css) }}</style>",
    f'<div style="background-image: url({OTHER_ORIGIN}/inline)">styled</div>',
    f'<link rel="stylesheet" href="{OTHER_ORIGIN}/sheet.css"><base href="{OTHER_ORIGIN}/">',
    f'<meta http-equiv="refresh" content="0; url={OTHER_ORIGIN}/refresh">',
    f'<div hx-get="{OTHER_ORIGIN}/htmx" hx-trigger="load">htmx</div>',
    '<div hx-on:htmx:load="window.__pwned = 5">htmx-on</div>',
    "{{ 7|add:7 }} {% debug %} ${7*7}",
    "\u202egnp.exe \u2066isolated\u2069 \u200fright-to-left",
    "</textarea></code></pre></td></tr></table><h1>escaped the table</h1>",
]

# What a page must never contain: each payload's markup, unescaped.
UNESCAPED = [
    "<script>window.__pwned",
    "<img src=x",
    f'<img src="{OTHER_ORIGIN}',
    "<svg",
    '<a href="javascript:',
    "<iframe",
    "<style>body",
    '<div style="background-image',
    f'<link rel="stylesheet" href="{OTHER_ORIGIN}',
    f'<base href="{OTHER_ORIGIN}',
    '<meta http-equiv="refresh"',
    f'<div hx-get="{OTHER_ORIGIN}',
    "<div hx-on",
    "<h1>escaped the table</h1>",
    "\u202e",
    "\u2066",
]

BIG_LINE_BYTES = 10 * 1024 * 1024
_NESTED = "<nested arrays>"


def _line(record: dict[str, object]) -> str:
    return json.dumps(record, separators=(",", ":"))


def claude_code_session(*, big_line: bool = False, nested_depth: int = 0) -> bytes:
    """Return a Claude Code JSONL session carrying every payload.

    Each payload appears as user text, assistant text, a tool input and a
    tool result, and every other one in a tool call's id and name (which
    makes that call malformed); the last call has no result. `big_line`
    makes one tool result a 10 MB single line; `nested_depth` nests one
    tool input that deep.
    """
    lines = []
    parent = None
    for n, payload in enumerate(PAYLOADS):
        # Invalid ids and names make malformed calls: every other call is one.
        call_id = f"toolu_{n:02d}{payload}" if n % 2 else f"toolu_{n:02d}"
        user = f"u{n}a"
        assistant = f"a{n}"
        result = f"u{n}b"
        tool_input: dict[str, object] = {"command": payload}
        if nested_depth and n == 0:
            tool_input["nested"] = _NESTED
        lines.append(
            _line(
                {
                    "type": "user",
                    "uuid": user,
                    "parentUuid": parent,
                    "sessionId": "hostile",
                    "message": {"role": "user", "content": payload},
                }
            )
        )
        lines.append(
            _line(
                {
                    "type": "assistant",
                    "uuid": assistant,
                    "parentUuid": user,
                    "sessionId": "hostile",
                    "message": {
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": payload},
                            {
                                "type": "tool_use",
                                "id": call_id,
                                "name": f"run{payload}" if n % 2 else "run",
                                "input": tool_input,
                            },
                        ],
                    },
                }
            )
        )
        parent = assistant
        if n == len(PAYLOADS) - 1:
            break  # the last call stays unanswered
        content = payload
        if big_line and n == 2:
            content = payload + "A" * BIG_LINE_BYTES
        lines.append(
            _line(
                {
                    "type": "user",
                    "uuid": result,
                    "parentUuid": assistant,
                    "sessionId": "hostile",
                    "message": {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": call_id, "content": content}
                        ],
                    },
                }
            )
        )
        parent = result
    text = "\n".join(lines) + "\n"
    # Built as text: Python's own encoder would recurse that deep.
    text = text.replace(json.dumps(_NESTED), "[" * nested_depth + "]" * nested_depth)
    return text.encode()


def deeply_nested(depth: int = 100_000) -> bytes:
    """Return a JSON document of arrays nested `depth` deep: no parser's stack holds it."""
    return b"[" * depth + b"]" * depth


# Text no database column takes as it is: NUL (as agents write binary tool output),
# lone surrogates, ids and names longer than any column.
NUL = "\u0000"
LONG_ID = "toolu_" + "x" * 300 + NUL + "end"


def unstorable_session() -> bytes:
    """Return a Claude Code JSONL session whose text only a careful store keeps.

    NUL in user and assistant text, in tool call ids (one of more than
    300 characters), a tool name (a malformed call), inputs and results;
    the long id's result comes twice, one call is left unanswered, a line
    has a lone surrogate escape
    (not JSON orjson reads) and one with a raw NUL byte and bytes that are
    not UTF-8. Repairing it inserts, drops and audits results of those ids.
    """

    def record(uid: str, parent: str | None, role: str, content: object) -> str:
        kind = "assistant" if role == "assistant" else "user"
        message: dict[str, object] = {"role": role, "content": content}
        if role == "assistant":
            message["id"] = f"msg_{uid}"
        return _line(
            {
                "type": kind,
                "uuid": uid,
                "parentUuid": parent,
                "sessionId": f"nul{NUL}",
                "message": message,
            }
        )

    def use(call_id: str, name: str = "Bash") -> dict[str, object]:
        return {
            "type": "tool_use",
            "id": call_id,
            "name": name,
            "input": {"command": f"cat /bin/ls{NUL}", "bytes": "\x00\x01\x7f" + "\ufffe"},
        }

    def answer(call_id: str) -> dict[str, object]:
        return {"type": "tool_result", "tool_use_id": call_id, "content": f"ELF{NUL}{NUL}\x02"}

    lines = [
        record("u1", None, "user", f"show me{NUL} the binary"),
        record("a1", "u1", "assistant", [{"type": "text", "text": f"ok{NUL}"}, use(LONG_ID)]),
        record("u2", "a1", "user", [answer(LONG_ID)]),
        record("u3", "u2", "user", [answer(LONG_ID)]),
        record(
            "a2",
            "u3",
            "assistant",
            [use(f"toolu_2{NUL}"), use("toolu_3\u202e"), use("toolu_4", f"Bash{NUL}")],
        ),
        record("u4", "a2", "user", [answer("toolu_3\u202e")]),
        '{"type":"user","uuid":"u5","message":{"role":"user","content":"lone \\ud800 half"}}',
        '{"type":"user","uuid":"u6","message":{"content":"raw \x00 byte \udcff"}}',
        record("a3", "u4", "assistant", [{"type": "text", "text": f"done{NUL}"}]),
    ]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
