"""How the wording trainers batch their rows: length-grouped batches in a seeded order, and
activations kept (no gradient checkpointing) only where they fit in memory."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from trainers.wording.bases import activation_bytes, activations_fit
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
