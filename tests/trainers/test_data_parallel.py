"""Data parallel proven on the CPU: the project's DPO training stage (`trainers.wording.dpo`'s
`train_dpo`, TRL's DPOTrainer with the LoRA, reading the pairs in the stage's own order) runs
under torchrun with two processes on gloo, and trains what one process trains on the same global
batch.

The Trainer itself runs in both (no hand-written step): tests/trainers/ddp_stage.py records the
LoRA gradients each optimizer step is given and the trained adapter. Two ranks of two pairs a
step are set beside one process of four pairs a step over the same pairs in the same order, in
float32 (LEVERS9_CPU_BF16=0), for three steps:

  * the gradients are averaged: both ranks hold the same gradient at every step, and it is the
    one-process gradient of the whole global batch's mean loss (the average of the two ranks'
    own gradients) — not rank 0's own half alone, and not their sum;
  * the trained adapter equals the one process's within 1e-6 (absolute, on every LoRA weight;
    measured about 1e-8), while a process that reads only two pairs a step ends 1e-4 away.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.trainers.ddp_stage import STEPS, stage_pairs, train_stage
from trainers.bases import TINY_BASE, base_dir, tiny_base

REPO = Path(__file__).resolve().parents[2]
GRADIENT_TOLERANCE = 1e-5
"""Of the largest gradient's size (measured: about 3e-7)."""
ADAPTER_TOLERANCE = 1e-6

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(rank 0, rank 1, one process of the global batch, one process of rank 0's batch)."""
    root = tmp_path_factory.mktemp("data-parallel")
    models_dir = root / "models"
    texts = [text for pair in stage_pairs() for text in (pair["chosen"], pair["rejected"])]
    tiny_base(base_dir(TINY_BASE, models_dir), texts=texts)
    env = {**os.environ, "LEVERS9_CPU_BF16": "0", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "tests.trainers.ddp_stage", str(models_dir), str(root),
    ]  # fmt: skip
    finished = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    ranks = [torch.load(root / f"rank{rank}.pt") for rank in (0, 1)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEVERS9_CPU_BF16", "0")
        whole = train_stage(models_dir, root / "whole", pairs_per_step=4)
        half = train_stage(models_dir, root / "half", pairs_per_step=2)
    return ranks, whole, half


def _largest_difference(left: dict, right: dict) -> float:
    assert left.keys() == right.keys()
    return max((left[name] - right[name]).abs().max().item() for name in left)


def _size(tensors: dict) -> float:
    return max(tensor.abs().max().item() for tensor in tensors.values())


def test_it_runs_two_processes_on_gloo(runs):
    ranks, whole, _half = runs
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    assert [rank["backend"] for rank in ranks] == ["gloo", "gloo"]
    assert [len(rank["gradients"]) for rank in ranks] == [STEPS, STEPS]
    assert len(whole["gradients"]) == STEPS


def test_it_averages_the_gradients(runs):
    (rank0, rank1), whole, half = runs
    for step in range(STEPS):
        synced, global_batch = rank0["gradients"][step], whole["gradients"][step]
        tolerance = GRADIENT_TOLERANCE * _size(global_batch)
        assert _largest_difference(synced, rank1["gradients"][step]) <= tolerance
        assert _largest_difference(synced, global_batch) <= tolerance
        summed = {name: 2 * gradient for name, gradient in global_batch.items()}
        assert _largest_difference(synced, summed) > 100 * tolerance
    # At the first step both runs start from the same weights: rank 0's own half differs.
    first = whole["gradients"][0]
    own_half = half["gradients"][0]
    assert _largest_difference(rank0["gradients"][0], own_half) > 100 * GRADIENT_TOLERANCE * _size(
        first
    )


def test_it_trains_the_adapter_one_process_trains_on_the_global_batch(runs):
    (rank0, rank1), whole, half = runs
    assert _largest_difference(rank0["adapter"], rank1["adapter"]) <= ADAPTER_TOLERANCE
    assert _largest_difference(rank0["adapter"], whole["adapter"]) <= ADAPTER_TOLERANCE
    assert _largest_difference(rank0["adapter"], half["adapter"]) > 10 * ADAPTER_TOLERANCE
