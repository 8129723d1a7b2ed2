"""What the provider layer costs on top of the endpoint: replies per second through the real
openai client, its slots and retries, against an instant OpenAI-compatible server on loopback.

    python -m bench.provider_overhead [--requests 400] [--threads 8] [--concurrency 4]

The server answers at once, so the figure is our overhead (client, JSON, HTTP on loopback,
the per-endpoint semaphore), not a model's speed: a vLLM endpoint's own latency adds to it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from levers9.providers import CallLimits, ModelTarget, provider_for

_ANSWER = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello."},
                "finish_reason": "stop",
            }
        ],
    }
).encode()


class _Instant(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body in one write, sent at once: else delayed ACKs add 40 ms a reply.
    wbufsize = 65536
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        return

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_ANSWER)))
        self.end_headers()
        self.wfile.write(_ANSWER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    arguments = parser.parse_args(argv)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = ModelTarget(
        "vllm", model="bench", base_url=f"http://127.0.0.1:{server.server_port}/v1"
    )
    provider = provider_for(target, limits=CallLimits(concurrency=arguments.concurrency))
    messages = [{"role": "user", "content": "Hi, is the flat still free?"}]
    provider.reply(messages)  # warm: imports, the client, the connection

    latencies: list[float] = []

    def one(_):
        started = time.perf_counter()
        provider.reply(messages, max_tokens=8)
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(arguments.threads) as pool:
        list(pool.map(one, range(arguments.requests)))
    elapsed = time.perf_counter() - started
    server.shutdown()
    latencies.sort()
    print(  # noqa: T201
        f"provider overhead: {arguments.requests / elapsed:,.0f} replies/s with "
        f"{arguments.threads} threads through {arguments.concurrency} slots; "
        f"median {statistics.median(latencies) * 1000:.1f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95) - 1] * 1000:.1f} ms per reply"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
