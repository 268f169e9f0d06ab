"""A strict local stand-in for the model providers the agent CLIs talk to.

The real providers are remote services, so the agent tier runs the real agent
CLIs against this server instead. It speaks the three wire protocols the agents
use: Anthropic Messages (`POST /v1/messages`, SSE when `stream` is true), OpenAI
Responses (`POST /v1/responses`, SSE; a websocket upgrade is answered 426 so the
client falls back to SSE) and Gemini (`:generateContent` and
`:streamGenerateContent`). Every request body is recorded. In strict mode a
request that breaks the provider's pairing rules (`transcripts.replay.check_request`)
is answered 400 with the provider's own error shape and text, as the real API
answers it; otherwise the reply is one short assistant text.

Binds 127.0.0.1 on a free port; stop it with `close()`.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from transcripts.replay import check_request

REPLY = "Resumed."


@dataclass
class Captured:
    """One request the agent sent: its provider, path, decoded body and our answer's status."""

    provider: str
    path: str
    body: dict[str, Any]
    status: int = 200
    error: str = ""


@dataclass
class MockProvider:
    """The running server: `url` is `http://127.0.0.1:<port>`; `requests` what it received."""

    strict: bool = True
    requests: list[Captured] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> MockProvider:
        handler = type("Handler", (_Handler,), {"provider": self})
        self.server = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def conversation_requests(self, provider: str) -> list[Captured]:
        """Return the recorded requests of `provider` that carry a conversation."""
        keys = {"anthropic": "messages", "openai_responses": "input", "gemini": "contents"}
        with self.lock:
            return [r for r in self.requests if r.provider == provider and keys[provider] in r.body]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Codex drops its websocket attempt's connection once answered 426; a
        # client hanging up is no failure of the provider.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _openai_error(message: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


def _gemini_error(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


_GEMINI_PATH = re.compile(r"/v1(?:beta|alpha)?/models/(?P<model>[^:/]+):(?P<method>\w+)")


class _Handler(BaseHTTPRequestHandler):
    provider: MockProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            value = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, dict[str, Any]]]) -> None:
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            chunks.append(f"{head}data: {json.dumps(data)}\n\n")
        body = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self, provider: str, body: dict[str, Any]) -> Captured:
        captured = Captured(provider, self.path, body)
        conversation = {"anthropic": "messages", "openai_responses": "input", "gemini": "contents"}
        if self.provider.strict and conversation[provider] in body:
            violations = check_request(provider, body)
            if violations:
                captured.status, captured.error = 400, violations[0].error
        with self.provider.lock:
            self.provider.requests.append(captured)
        return captured

    def do_GET(self) -> None:
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self._json(426, _openai_error("websocket not supported; use HTTP"))
            return
        if self.path.split("?")[0].endswith("/models"):
            self._json(200, {"object": "list", "data": [], "models": []})
            return
        self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        body = self._body()
        if path.endswith("/v1/messages/count_tokens"):
            self._json(200, {"input_tokens": 10})
        elif path.endswith("/v1/messages"):
            self._anthropic(self._record("anthropic", body), body)
        elif path.endswith("/responses"):
            self._responses(self._record("openai_responses", body), body)
        elif (match := _GEMINI_PATH.search(path)) is not None:
            self._gemini(self._record("gemini", body), match["method"])
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _anthropic(self, captured: Captured, body: dict[str, Any]) -> None:
        if captured.status != 200:
            self._json(captured.status, _anthropic_error(captured.error))
            return
        usage = {"input_tokens": 10, "output_tokens": 2}
        message = {
            "id": "msg_mock",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "mock"),
            "content": [{"type": "text", "text": REPLY}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self._json(200, message)
            return
        start = dict(message, content=[], stop_reason=None)
        self._sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": REPLY},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 2},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    def _responses(self, captured: Captured, body: dict[str, Any]) -> None:
        if captured.status != 200:
            self._json(captured.status, _openai_error(captured.error))
            return
        item = {
            "type": "message",
            "id": "msg_mock",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
        }
        response = {
            "id": "resp_mock",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model", "mock"),
            "output": [item],
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 2,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 12,
            },
        }
        if not body.get("stream"):
            self._json(200, response)
            return
        created = dict(response, status="in_progress", output=[])
        self._sse(
            [
                ("response.created", {"type": "response.created", "response": created}),
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "item": dict(item, status="in_progress", content=[]),
                    },
                ),
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": "msg_mock",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": REPLY,
                    },
                ),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                ),
                ("response.completed", {"type": "response.completed", "response": response}),
            ]
        )

    def _gemini(self, captured: Captured, method: str) -> None:
        if captured.status != 200:
            self._json(captured.status, _gemini_error(captured.error))
            return
        answer = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": REPLY}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 2,
                "totalTokenCount": 12,
            },
            "modelVersion": "mock",
        }
        if method == "streamGenerateContent":
            self._sse([(None, answer)])
        elif method == "countTokens":
            self._json(200, {"totalTokens": 10})
        else:
            self._json(200, answer)
