"""A model server stub on loopback: OpenAI's /v1/chat/completions (what vLLM speaks too),
Anthropic's /v1/messages and /v1/models, answered from a script the test writes.

A real http.server in a thread, so the real `openai` and `anthropic` clients talk to it over
real sockets: timeouts, status codes and headers are the real thing.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """One scripted answer: the reply text, or an error status with its body."""

    text: str = "Happy to help: shall we book a viewing this week?"
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error_message: str = "stubbed error"


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StubModelServer:
    def __init__(self) -> None:
        self.script: deque[Answer] = deque()
        self.default = Answer()
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- the test's side ---
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def then(self, *answers: Answer) -> StubModelServer:
        self.script.extend(answers)
        return self

    def start(self) -> StubModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self) -> Answer:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    # --- the server's side ---
    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # quiet
                return

            def _send(self, status: int, payload: dict, headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(200, {"object": "list", "data": [{"id": "stub"}]}, {})
                else:
                    self._send(404, {"error": {"message": "no such route"}}, {})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                with stub._lock:
                    stub.requests.append(
                        Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                try:
                    answer = stub._next()
                    if answer.delay:
                        time.sleep(answer.delay)
                    if answer.status != 200:
                        payload = {
                            "type": "error",
                            "error": {"type": "stub_error", "message": answer.error_message},
                        }
                        self._send(answer.status, payload, answer.headers)
                    elif self.path.endswith("/chat/completions"):
                        self._send(200, _chat_completion(body, answer.text), answer.headers)
                    elif self.path.endswith("/messages"):
                        self._send(200, _anthropic_message(body, answer.text), answer.headers)
                    else:
                        self._send(404, {"error": {"message": "no such route"}}, {})
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

        return Handler


def _chat_completion(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _anthropic_message(body: dict, text: str) -> dict:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
