"""Evaluate against slow endpoints: concurrent (bounded per endpoint) against one call after
another, on an OpenAI-compatible stub on loopback that answers after 200 ms.

    python -m bench.evaluation_concurrency                # the figures of issue 8 (~3 minutes)
    python -m bench.evaluation_concurrency --calls 10     # a quicker run

Needs PostgreSQL: DATABASE_URL, or else the embedded server (started here if need be). In a
throwaway workspace ``bench-eval-<hex>`` it imports forty of the shared real calls into two
worlds (so both runs start from nothing: no judgement cached), registers two versions on vLLM
endpoints of the stub, names a vLLM judge on the same stub for both worlds, and runs the
whole evaluation service (evaluation_run: the replays, the judge on every answer and on the
real agent's turns, the results written) twice:

1. one call after another (one slot per endpoint), then
2. concurrently: every endpoint bounded to --slots requests in flight (the provider's
   LEVERS9_PROVIDER_CONCURRENCY, which the evaluation's own per-version and judge
   semaphores follow).

It prints both times and the ratio (target: at least 20x), and checks that both runs found
the same results. The workspace, its schema and its files are removed at the end.

The stub is a real ``http.server`` in a thread (keep-alive, a listen backlog deep enough for
the bound): an agent's request is answered with a line of words, a judge's with a JSON
verdict whose scores are a function of the reply, so the two versions differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.django_app import setup_django, workspaces_drop
from levers9.shipped_data import PERSUASION_CALLS

DIMENSIONS = ("dialect", "respect", "accuracy", "progress", "family", "timing", "compliance")
AGENT_LINES = {
    "stub-a": "I understand. Would you consider a small donation to Save the Children today?",
    "stub-b": "Thanks for chatting! Have you heard of Save the Children and what they do?",
}


def _completion(model: str, content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


def _verdict(reply: str) -> str:
    """Scores that depend only on the reply, so every run judges the same reply the same."""
    digest = hashlib.sha256(reply.encode()).digest()
    scores = {name: round(0.4 + (digest[i] % 60) / 100, 2) for i, name in enumerate(DIMENSIONS)}
    reasons = {name: "The stub's verdict." for name in DIMENSIONS}
    return json.dumps({"scores": scores, "reasons": reasons})


class OpenAIStub:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 that answers after `delay`."""

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        stub = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            # socketserver listens with a backlog of 5: with dozens of requests in flight the
            # rest would be refused and retried, and the bench would measure the retries.
            request_queue_size = 512

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection per client slot
            wbufsize = 65536
            disable_nagle_algorithm = True

            def log_message(self, format, *args):
                return

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with stub._lock:
                    stub.requests += 1
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                try:
                    time.sleep(stub.delay)
                    messages = body.get("messages") or []
                    system = messages[0]["content"] if messages else ""
                    if system.startswith("You judge one reply"):
                        content = _verdict(messages[-1]["content"])
                    else:
                        content = AGENT_LINES.get(body.get("model", ""), "Hello.")
                    data = _completion(body.get("model", ""), content)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> OpenAIStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _run_once(*, slug: str, calls_text: str, versions, stub: OpenAIStub, slots: int):
    """A fresh world of the same calls judged by the stub, and one evaluation run in it."""
    import logging

    from arena.judge.world_judge_choice import world_judge_set
    from arena.services.calls import calls_import
    from arena.services.worlds import world_create
    from evaluation.call_sets import call_set_ensure
    from evaluation.models import Evaluation
    from evaluation.replay import evaluation_run
    from levers9 import providers

    # The provider's per-endpoint bound is read from the environment and sized by its first
    # caller in the process: set it, and forget the slots of the previous run.
    os.environ["LEVERS9_PROVIDER_CONCURRENCY"] = str(slots)
    providers._SEMAPHORES.clear()
    for name in ("levers9.providers", "httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)
    world = world_create(slug=slug, name=f"Bench ({slots} slots)")
    calls_import(world=world, text=calls_text, source="bench")
    world = world_judge_set(
        world=world, provider="vllm", model="stub-judge", endpoint_url=stub.base_url
    )
    evaluation = Evaluation.objects.create(
        world=world,
        call_set=call_set_ensure(world=world),
        candidate=versions[1],
        baseline=versions[0],
    )
    requests_before = stub.requests
    stub.most_in_flight = 0
    started = time.perf_counter()
    summary = evaluation_run(evaluation=evaluation)
    elapsed = time.perf_counter() - started
    return elapsed, summary, stub.requests - requests_before, stub.most_in_flight


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the stub waits")
    parser.add_argument("--calls", type=int, default=40, help="real calls to replay (40)")
    parser.add_argument("--slots", type=int, default=32, help="requests in flight per endpoint")
    parser.add_argument("--target", type=float, default=20.0, help="speed-up to reach")
    args = parser.parse_args(argv)

    datasets_dir = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    setup_django(datasets_dir)
    from django_tenants.utils import schema_context

    from levers9.services import workspace_create
    from policies.models import PolicyVersion
    from policies.services import version_register

    calls_text = "\n".join(PERSUASION_CALLS.read_text().splitlines()[: args.calls])
    stub = OpenAIStub(delay=args.delay).start()
    slug = f"bench-eval-{secrets.token_hex(3)}"
    ok = True
    try:
        created = workspace_create(
            slug=slug, admin_email=f"owner@{slug}.test", password=secrets.token_urlsafe(18)
        )
        with schema_context(created.workspace.schema_name):
            baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
            versions = [
                version_register(
                    world=baseline.world,
                    name=model,
                    parent=baseline,
                    move_strategy={},
                    learned_from={"kind": "bench"},
                    provider=PolicyVersion.Provider.VLLM,
                    provider_model=model,
                    endpoint_url=stub.base_url,
                )
                for model in AGENT_LINES
            ]
            print(
                f"Workspace {slug}: {args.calls} real calls, 4 agent turns each, two versions "
                f"and the judge on a stub answering after {args.delay * 1000:.0f} ms"
            )
            runs = {}
            for name, slots in (("one after another", 1), ("concurrent", args.slots)):
                elapsed, summary, requests, most = _run_once(
                    slug=f"bench-{slots}",
                    calls_text=calls_text,
                    versions=versions,
                    stub=stub,
                    slots=slots,
                )
                runs[name] = (elapsed, summary)
                print(
                    f"  {name:<18} {elapsed:8.2f} s   {requests} requests to the stub, "
                    f"at most {most} in flight ({slots} per endpoint)"
                )
        sequential, concurrent = runs["one after another"], runs["concurrent"]
        ratio = sequential[0] / concurrent[0]
        print(f"Speed-up: {ratio:.1f}x (target: at least {args.target:g}x)")
        same = all(
            sequential[1][key] == concurrent[1][key]
            for key in ("win_rate", "ci", "wins", "ties", "losses", "regressions", "per_call")
        )
        print(
            f"Same results both ways: {'yes' if same else 'NO'} (win rate "
            f"{concurrent[1]['win_rate']}, {concurrent[1]['compared']} turns compared, "
            f"{len(concurrent[1]['regressions'])} regressions)"
        )
        ok = ratio >= args.target and same
    finally:
        stub.stop()
        workspaces_drop([slug])
        shutil.rmtree(datasets_dir, ignore_errors=True)
        print(f"Deleted workspace {slug}, its schema and its files.")
    if not ok:
        raise SystemExit("The target was missed or the two runs disagreed (see above).")
    return 0


if __name__ == "__main__":
    main()
