"""A stand-in for `python -m vllm.entrypoints.openai.api_server` in tests: the same flags,
an OpenAI-compatible /v1/models and /v1/chat/completions on the port it is given."""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--served-model-name")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--lora-modules", default="")
    arguments, _others = parser.parse_known_args()
    names = [arguments.served_model_name]
    if arguments.lora_modules:
        names.append(arguments.lora_modules.split("=")[0])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):
            return

        def _send(self, payload: dict, status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": name} for name in names]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body.get("model") not in names:
                self._send({"error": {"message": f"no model {body.get('model')}"}}, 404)
                return
            text = f"Fake vLLM ({body['model']}) here: shall we book a viewing?"
            self._send(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                }
            )

    ThreadingHTTPServer(("127.0.0.1", arguments.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
