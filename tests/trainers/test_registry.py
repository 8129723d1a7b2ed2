"""The registry of trainer names: one module and one family per name, and every module is
there to run."""

from __future__ import annotations

import importlib.util

import pytest

from trainers.moves.engines import ALGORITHMS
from trainers.registry import TRAINERS, Family, trainer_family, trainer_module, trainers_of


def test_it_names_a_module_that_exists_for_every_trainer():
    for name, trainer in TRAINERS.items():
        assert trainer.name == name
        assert importlib.util.find_spec(trainer.module) is not None, trainer.module


def test_it_lists_the_names_of_a_family_in_order():
    assert trainers_of(Family.MOVE_STRATEGY) == ("q-learning-online", "ppo")
    assert trainers_of(Family.WORDING) == ("rlhf", "dpo")
    assert trainers_of(Family.OFFLINE_MOVES, Family.MOVE_REWARD) == (
        "reward-model",
        "offline-outcome",
    )
    assert trainers_of() == ()


def test_it_says_which_family_a_name_is_and_none_for_a_stranger():
    assert trainer_family("dpo") is Family.WORDING
    assert trainer_family("judge-fit") is Family.JUDGE
    assert trainer_family("evaluate") is None


def test_it_refuses_an_unknown_name_with_the_known_ones():
    assert trainer_module("serve") == "trainers.serving.local"
    with pytest.raises(KeyError, match="known trainers: q-learning-online, ppo"):
        trainer_module("sarsa")


def test_engines_run_the_modules_the_registry_names():
    assert list(ALGORITHMS) == ["q-learning-online", "reward-model", "ppo"]
    for name, engine in ALGORITHMS.items():
        assert engine.module == trainer_module(name)
        # The module `python -m` runs is the one whose run() the page calls.
        assert engine.run.__module__ == engine.module
