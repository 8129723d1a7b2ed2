"""One check a lent GPU machine runs as it is, in under eight minutes; it prints one table.

    python -m bench.gpu_check [--minutes 7] [--steps 40] [--smoke]

On the largest base this machine has without a hub (every converted base under the models
folder, and the SmolLM2 wheel at least) and on the shared real data (the hh-rlhf pairs, the
PersuasionForGood calls), it runs, each for a few dozen optimizer steps:

  * DPO on the pairs, then RLHF (reward model on the pairs, then the PPO-style policy update),
    on one card, in the precision the trainers choose (bf16 where the card or CPU has it);
  * DPO again over every card with `torchrun` (data parallel), when there is more than one;
  * vLLM serving the DPO version's merged weights, when `vllm` imports here;

and prints, per stage: cards, steps, seconds, trained tokens a second, peak GPU memory and the
held-out figure with its interval. Every stage gets a share of the time left, so the whole
check ends in time whatever the machine; a stage that cannot run says why in its row. Never part
of CI. `--smoke` runs the same code on the tiny local model for two steps (a CPU check of the
script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PAIRS = SHARED / "preferences" / "hh-rlhf-harmless" / "pairs.jsonl"


def _pairs(limit: int) -> list[dict[str, Any]]:
    """The shared pairs as spec pairs (each pair its own hold-out group)."""
    from arena.judge.fitted import preference_rows

    if not PAIRS.exists():
        raise SystemExit(f"The shared preference pairs are not at {PAIRS}.")
    records = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    rows = preference_rows(records[:limit])
    return [
        {
            "dialogue": row["context"],
            "chosen": row["chosen"],
            "rejected": row["rejected"],
            "call_id": row["group"],
        }
        for row in rows
    ]


def _largest_base(models_dir: Path, *, smoke: bool) -> str:
    from trainers.wording.bases import SMOLLM2_BASE, TINY_BASE, base_dir, convert_smollm2, tiny_base

    if smoke:
        tiny_base(base_dir(TINY_BASE, models_dir), texts=["hello there", "no thanks"])
        return TINY_BASE
    convert_smollm2(models_dir)
    sizes = {}
    for folder in (models_dir / "bases").iterdir():
        weights = list(folder.glob("*.safetensors"))
        if weights:
            sizes[folder.name] = sum(path.stat().st_size for path in weights)
    return max(sizes, key=sizes.get) if sizes else SMOLLM2_BASE


def _mean_tokens(base: str, models_dir: Path, pairs: list[dict[str, Any]]) -> float:
    """Mean tokens of a prompt with one reply, through the chat template (for tokens/s)."""
    from bench.wording import mean_conversation_tokens
    from trainers.wording.bases import load_tokenizer

    return mean_conversation_tokens(load_tokenizer(base, models_dir=models_dir), pairs)


def _peak_gb() -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    peak = max(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count()))
    for index in range(torch.cuda.device_count()):
        torch.cuda.reset_peak_memory_stats(index)
    return round(peak / 2**30, 2)


def _row(stage: str, **values: Any) -> dict[str, Any]:
    return {"stage": stage, **values}


def _figure(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7.0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=1150)
    parser.add_argument("--models-dir", default=os.environ.get("LEVERS9_MODELS_DIR", "var/models"))
    parser.add_argument("--smoke", action="store_true")
    arguments = parser.parse_args()
    deadline = time.monotonic() + arguments.minutes * 60
    steps = 2 if arguments.smoke else arguments.steps

    import torch

    from trainers.wording import dpo, rlhf
    from trainers.wording.bases import cpu_has_bf16

    cards = torch.cuda.device_count()
    device = torch.cuda.get_device_name(0) if cards else "cpu"
    bf16 = torch.cuda.is_bf16_supported() if cards else cpu_has_bf16()
    models_dir = Path(arguments.models_dir).resolve()
    models_dir.mkdir(parents=True, exist_ok=True)
    base = _largest_base(models_dir, smoke=arguments.smoke)
    pairs = _pairs(40 if arguments.smoke else arguments.pairs)
    tokens = _mean_tokens(base, models_dir, pairs)
    batch = 2 if arguments.smoke else 8
    rows: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-", dir=models_dir))

    def spec(name: str, **extra: Any) -> dict[str, Any]:
        # Each stage may use its share of the time that is left (four stages at most).
        budget = max(20.0, (deadline - time.monotonic()) / 4)
        return {
            "pack": "gpu-check",
            "version": 1,
            "base": base,
            "gpu": {"type": "cuda" if cards else "cpu", "count": 1},
            "epochs": 1,
            "pairs": pairs,
            "seed": 0,
            "models_dir": str(models_dir),
            "output_dir": str(scratch / name),
            "min_pairs": 10,
            "time_budget_s": budget,
            **extra,
        }

    started = time.monotonic()
    dpo_spec = spec("dpo", dpo={"batch_size": batch, "max_steps": steps})
    try:
        result = dpo.run(dpo_spec)
        metrics = result["metrics"]
        seconds = result["seconds"]["train"]
        rows.append(
            _row(
                "DPO (1 card)",
                cards=1,
                steps=metrics["steps"],
                seconds=round(seconds, 1),
                tokens_per_s=round(metrics["steps"] * batch * 2 * tokens / max(seconds, 1e-9)),
                peak_gb=_peak_gb(),
                held_out=_figure(metrics["held_out_accuracy"], metrics["held_out_accuracy_ci"])
                + f" (base {_figure(metrics['base_held_out_accuracy'], None)})",
            )
        )
        merged = result["version"]["merged_weights"]
    except Exception as error:  # a row that says why, and the check goes on
        rows.append(_row("DPO (1 card)", error=f"{type(error).__name__}: {error}"[:160]))
        merged = None

    try:
        result = rlhf.run(
            spec(
                "rlhf",
                reward_source="picks",
                reward_model={"batch_size": batch, "max_steps": steps},
                policy={
                    "batch_size": 4,
                    "replies_per_prompt": 2,
                    "max_reply_tokens": 48,
                    "max_steps": max(2, steps // 4),
                    "held_out_prompts": 16,
                },
            )
        )
        metrics, seconds = result["metrics"], result["seconds"]
        reward = metrics["reward_model"]
        rows.append(
            _row(
                "reward model (1 card)",
                cards=1,
                steps=reward["steps"],
                seconds=round(seconds["reward_model"], 1),
                tokens_per_s=round(
                    reward["steps"] * batch * 2 * tokens / max(seconds["reward_model"], 1e-9)
                ),
                peak_gb=_peak_gb(),
                held_out=_figure(reward["held_out_accuracy"], reward["held_out_accuracy_ci"]),
            )
        )
        rows.append(
            _row(
                "RLHF policy (1 card)",
                cards=1,
                steps=metrics["policy_steps"],
                seconds=round(seconds["policy"], 1),
                peak_gb=_peak_gb(),
                held_out=f"KL {metrics['kl'] or 0:.4f} · reward {metrics['reward_before']}"
                f" → {metrics['reward_after']} on {metrics['held_out_prompts']} held-out prompts",
            )
        )
    except Exception as error:
        rows.append(_row("RLHF (1 card)", error=f"{type(error).__name__}: {error}"[:160]))

    if cards > 1 and time.monotonic() < deadline - 60:
        spec_file = scratch / "dpo-parallel.json"
        out_file = scratch / "dpo-parallel-result.json"
        parallel = spec("dpo-parallel", gpu={"type": "cuda", "count": cards})
        parallel["dpo"] = {"batch_size": batch, "max_steps": steps}
        spec_file.write_text(json.dumps(parallel))
        began = time.monotonic()
        command = [
            sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={cards}",
            "-m", "trainers.wording.dpo", "--spec", str(spec_file), "--out", str(out_file),
        ]  # fmt: skip
        # Our own interpreter and module, with paths this script wrote.
        finished = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        elapsed = time.monotonic() - began
        if finished.returncode == 0 and out_file.exists():
            metrics = json.loads(out_file.read_text())["metrics"]
            rows.append(
                _row(
                    f"DPO data parallel ({cards} cards, torchrun)",
                    cards=cards,
                    steps=metrics["steps"],
                    seconds=round(elapsed, 1),
                    tokens_per_s=round(metrics["steps"] * batch * cards * 2 * tokens / elapsed),
                    held_out=_figure(metrics["held_out_accuracy"], metrics["held_out_accuracy_ci"]),
                )
            )
        else:
            rows.append(_row("DPO data parallel", error=finished.stderr.strip()[-160:]))
    else:
        rows.append(_row("DPO data parallel", error=f"{cards} card(s) here: nothing to spread"))

    rows.append(_vllm_row(merged, pairs, deadline))
    _print(rows, device=device, cards=cards, bf16=bf16, base=base, tokens=tokens, started=started)


def _vllm_row(merged: str | None, pairs: list[dict[str, Any]], deadline: float) -> dict:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return _row("vLLM serving the merged weights", error="vllm is not installed here")
    if merged is None or time.monotonic() > deadline - 45:
        return _row("vLLM serving the merged weights", error="no merged weights or no time left")
    from vllm import LLM, SamplingParams

    began = time.monotonic()
    engine = LLM(model=merged, gpu_memory_utilization=0.3, enforce_eager=True)
    prompts = [
        [{"role": "user", "content": pair["dialogue"][-1]["text"] if pair["dialogue"] else "Hi"}]
        for pair in pairs[:64]
    ]
    loaded = time.monotonic()
    outputs = engine.chat(prompts, SamplingParams(max_tokens=64, temperature=0.0))
    generated = sum(len(output.outputs[0].token_ids) for output in outputs)
    seconds = time.monotonic() - loaded
    return _row(
        "vLLM serving the merged weights",
        cards=1,
        seconds=round(seconds, 1),
        tokens_per_s=round(generated / max(seconds, 1e-9)),
        held_out=f"{len(outputs)} replies; load {loaded - began:.0f} s",
    )


def _print(rows, *, device, cards, bf16, base, tokens, started) -> None:
    print(
        f"device: {device} × {cards or 1} · bf16 {'yes' if bf16 else 'no'} · base {base} · "
        f"mean tokens a conversation {tokens:.0f}"
    )
    header = (
        f"{'stage':<44}{'cards':>6}{'steps':>7}{'s':>8}{'tokens/s':>10}{'peak GB':>9}  held out"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        if "error" in row:
            print(f"{row['stage']:<44}  not run: {row['error']}")
            continue
        print(
            f"{row['stage']:<44}{row.get('cards', ''):>6}{row.get('steps', ''):>7}"
            f"{row.get('seconds', ''):>8}{row.get('tokens_per_s', '—'):>10}"
            f"{row.get('peak_gb') if row.get('peak_gb') is not None else '—':>9}  "
            f"{row.get('held_out', '')}"
        )
    print(f"whole check: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
