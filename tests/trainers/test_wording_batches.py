"""How the wording trainers batch their rows: length-grouped batches in a seeded order, and
activations kept (no gradient checkpointing) only where they fit in memory."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from trainers.bases import activation_bytes, activations_fit
from trainers.wording.spec import length_grouped_order


def _padding(lengths: list[int], order: list[int], batch_size: int) -> int:
    padded = 0
    for first in range(0, len(order), batch_size):
        batch = [lengths[index] for index in order[first : first + batch_size]]
        padded += max(batch) * len(batch) - sum(batch)
    return padded


def test_it_reads_every_row_once_in_batches_of_like_length():
    lengths = [int(n) for n in np.random.default_rng(1).integers(10, 600, size=203)]
    order = length_grouped_order(lengths, batch_size=4, seed=0)
    assert sorted(order) == list(range(len(lengths)))
    shuffled = [int(i) for i in np.random.default_rng(0).permutation(len(lengths))]
    # Far less padding than batches drawn at random from the same rows.
    assert _padding(lengths, order, 4) < 0.3 * _padding(lengths, shuffled, 4)


def test_the_order_is_seeded_and_not_shortest_first():
    lengths = list(range(400))
    first = length_grouped_order(lengths, batch_size=4, seed=3)
    assert first == length_grouped_order(lengths, batch_size=4, seed=3)
    assert first != length_grouped_order(lengths, batch_size=4, seed=4)
    # A budget that stops after a tenth of the rows has seen long rows as well as short ones.
    seen = [lengths[index] for index in first[:40]]
    assert max(seen) > 200
    assert min(seen) < 200


def _model(layers: int = 30, hidden: int = 576, intermediate: int = 1536):
    config = SimpleNamespace(
        hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers
    )
    return SimpleNamespace(config=config)


def test_activations_are_kept_only_when_they_fit_in_half_the_free_memory(monkeypatch):
    monkeypatch.delenv("LEVERS9_GRADIENT_CHECKPOINTING", raising=False)
    model = _model()
    needed = activation_bytes(model.config, 3072)
    assert activations_fit(model, 3072, free_bytes=2 * needed)
    assert not activations_fit(model, 3072, free_bytes=2 * needed - 1)
    # Twice the tokens, twice the memory: a reward model on long calls checkpoints.
    assert activation_bytes(model.config, 6144) == 2 * needed


@pytest.mark.parametrize(("forced", "fits"), [("1", False), ("0", True)])
def test_the_environment_can_decide_checkpointing(monkeypatch, forced, fits):
    monkeypatch.setenv("LEVERS9_GRADIENT_CHECKPOINTING", forced)
    assert activations_fit(_model(), 10**9, free_bytes=1 if fits else 10**15) is fits


# --- batches sized to the card ----------------------------------------------------------------


def _qwen_8b_shape():
    config = SimpleNamespace(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36)
    return SimpleNamespace(config=config)


def test_a_card_with_room_keeps_activations_and_fills_its_step(monkeypatch):
    from trainers.wording.common import GPU_STEP_TOKENS, sized_batch

    monkeypatch.delenv("LEVERS9_GRADIENT_CHECKPOINTING", raising=False)
    rows, checkpointing = sized_batch(_model(), longest=256, sequences_per_row=2, free_bytes=10**13)
    assert (rows, checkpointing) == (GPU_STEP_TOKENS // 512, False)


def test_a_card_short_of_memory_checkpoints_before_it_shrinks_the_step(monkeypatch):
    from trainers.wording.common import checkpointed_bytes, sized_batch

    monkeypatch.delenv("LEVERS9_GRADIENT_CHECKPOINTING", raising=False)
    model = _qwen_8b_shape()
    # 120 GiB free: 64 pairs of 256 tokens do not keep their activations, but fit checkpointed.
    rows, checkpointing = sized_batch(model, longest=256, sequences_per_row=2, free_bytes=120 << 30)
    assert checkpointing
    assert rows == 64
    assert checkpointed_bytes(model.config, rows * 512) <= 0.5 * (120 << 30)
    # Less memory: fewer rows, still a whole number of groups of replies.
    rows, checkpointing = sized_batch(
        model, longest=1024, sequences_per_row=1, multiple=4, free_bytes=8 << 30
    )
    assert checkpointing
    assert rows % 4 == 0
    assert rows < 32


def test_only_a_gpu_spec_without_a_batch_size_sizes_its_batch_to_the_card(tmp_path):
    from trainers.wording.dpo import dpo_settings
    from trainers.wording.spec import parse_wording_spec

    def settings(**extra):
        spec = {
            "pack": "lettings",
            "version": 1,
            "base": "Qwen/Qwen3-8B",
            "pairs": [
                {"prompt": [{"role": "user", "content": "Hi"}], "chosen": "a", "rejected": "b"}
            ],
            "min_pairs": 1,
            "models_dir": str(tmp_path),
            **extra,
        }
        return dpo_settings(parse_wording_spec(spec, trainer="dpo"))

    assert settings(gpu={"type": "h200"}).sized_to_memory
    assert not settings(gpu={"type": "h200"}, dpo={"batch_size": 4}).sized_to_memory
    on_cpu = settings()
    assert not on_cpu.sized_to_memory
    assert on_cpu.batch_size == 4  # the CPU default stays


def test_padding_free_batches_only_where_trl_and_the_kernel_keep_them(monkeypatch):
    import torch

    from trainers.wording import dpo

    model = torch.nn.Linear(2, 2)
    model.config = SimpleNamespace(_attn_implementation="flash_attention_2")
    assert dpo.padding_free_arguments(model) == {}  # on the CPU
    monkeypatch.setattr(dpo, "model_device", lambda model: torch.device("cuda", 0))
    # TRL 1.16's DPOTrainer turns padding_free off with a warning: not asked for there.
    assert dpo.padding_free_arguments(model) == (
        {"padding_free": True} if dpo.trl_keeps_padding_free() else {}
    )
    monkeypatch.setattr(dpo, "trl_keeps_padding_free", lambda: True)
    assert dpo.padding_free_arguments(model) == {"padding_free": True}
    model.config._attn_implementation = "sdpa"
    assert dpo.padding_free_arguments(model) == {}


def test_the_reward_models_batches_are_grouped_by_length():
    from bench.wording import padding_share

    lengths = [(int(n), int(n) + 5) for n in np.random.default_rng(2).integers(20, 900, 400)]
    grouped = length_grouped_order([max(pair) for pair in lengths], batch_size=8, seed=0)
    shuffled = [int(i) for i in np.random.default_rng(0).permutation(len(lengths))]

    def cut(order):
        return [order[at : at + 8] for at in range(0, len(order), 8)]

    assert padding_share(lengths, cut(grouped)) < 0.5 * padding_share(lengths, cut(shuffled))
