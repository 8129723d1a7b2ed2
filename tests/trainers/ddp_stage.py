"""The project's DPO training stage (`trainers.wording.dpo.train_dpo`: TRL's DPOTrainer with the
LoRA, reading the pairs in the stage's seeded length-grouped order) on the tiny base, recording
each optimizer step's LoRA gradients (as the optimizer sees them) and the trained adapter.

tests/trainers/test_data_parallel.py runs it in its own process and, one process per rank,
under torchrun on the CPU (gloo):

    python -m torch.distributed.run --standalone --nproc_per_node 2 \
        -m tests.trainers.ddp_stage MODELS_DIR OUT_DIR

where each rank writes OUT_DIR/rank<R>.pt. Torch and TRL are imported inside functions, so the
test module can import this one for nothing.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

PAIRS_PER_RANK = 2
"""Pairs per process per step: a data-parallel step of two ranks reads twice as many."""
STEPS = 3


def stage_pairs(count: int = 24) -> list[dict[str, Any]]:
    """Spec pairs of several lengths, two to a call (a held-out tenth is split off by call)."""
    questions = ("Is the flat free?", "How much is the rent for the flat on Mill Road, please?")
    return [
        {
            "dialogue": [{"speaker": "customer", "text": questions[index % 2] * (1 + index % 3)}],
            "chosen": "Yes, happy to help. Shall I book you a viewing on Saturday?"[: 20 + index],
            "rejected": "No idea, call back later." * (1 + index % 2),
            "call_id": f"call-{index // 2}",
        }
        for index in range(count)
    ]


def train_stage(models_dir: Path, work_dir: Path, *, pairs_per_step: int) -> dict[str, Any]:
    """Train the stage for STEPS optimizer steps of `pairs_per_step` pairs per process, the
    pairs read in the order a run of PAIRS_PER_RANK per step reads them; float32 throughout.
    {"gradients": [{name: tensor}] per step, "adapter": {name: tensor}}."""
    import torch
    from transformers import TrainerCallback, set_seed

    from trainers.bases import TINY_BASE, load_base
    from trainers.wording import dpo

    class Gradients(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[dict[str, Any]] = []

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.steps.append(_lora(model, lambda parameter: parameter.grad))

    spec = {
        "pack": "ddp", "version": 1, "base": TINY_BASE, "pairs": stage_pairs(), "min_pairs": 1,
        "models_dir": str(models_dir), "output_dir": str(work_dir), "max_steps": STEPS,
        "dpo": {"batch_size": PAIRS_PER_RANK},
    }  # fmt: skip
    wording, settings = dpo.check_spec(spec)
    set_seed(settings.seed)
    model, tokenizer = load_base(TINY_BASE, models_dir=models_dir, dtype=torch.float32)
    # The order is the one a data-parallel run reads (batches of PAIRS_PER_RANK, rank by rank);
    # a single process reads the same pairs in steps of both ranks' batches.
    pairs = dpo.read_the_pairs(wording.pairs, tokenizer, settings)
    settings = dataclasses.replace(settings, batch_size=pairs_per_step)
    gradients = Gradients()
    work_dir.mkdir(parents=True, exist_ok=True)
    trainer = dpo.train_dpo(
        model, tokenizer, pairs, settings, gradients, checkpointing=False, work_dir=work_dir
    )
    policy = trainer.accelerator.unwrap_model(trainer.model)
    return {"gradients": gradients.steps, "adapter": _lora(policy, lambda parameter: parameter)}


def _lora(model: Any, read: Any) -> dict[str, Any]:
    return {
        name.replace("module.", ""): read(parameter).detach().clone()
        for name, parameter in model.named_parameters()
        if "lora_" in name and read(parameter) is not None
    }


def main(argv: list[str]) -> None:
    import torch

    models_dir, out_dir = Path(argv[0]), Path(argv[1])
    rank = int(os.environ.get("RANK", "0"))
    result = train_stage(models_dir, out_dir / f"work-{rank}", pairs_per_step=PAIRS_PER_RANK)
    result["world_size"] = int(os.environ.get("WORLD_SIZE", "1"))
    result["backend"] = (
        torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    )
    torch.save(result, out_dir / f"rank{rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1:])
