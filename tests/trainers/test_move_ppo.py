"""ppo over moves: beats a random policy, its clip bites when it takes several epochs, and a
seed fixes the result."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainers.moves.ppo import run
from trainers.moves.simulator import LettingsWorld, scenario_by_slug

SCENARIO = "family-relocating"
SMALL = {"iterations": 40, "batch_episodes": 512, "time_budget_s": 0}


def _run(**knobs: float) -> dict:
    return run({"algorithm": "ppo", "scenarios": [SCENARIO], "knobs": {**SMALL, **knobs}})


def _random_policy_return(world: LettingsWorld) -> float:
    """Exact expected return of picking each move uniformly at random (backward induction)."""
    chain = world.transitions.mean(axis=1)
    reward = world.rewards.mean(axis=1)
    values = np.zeros(world.n_states)
    for _ in range(world.max_turns + 1):
        values = reward + chain @ values
    return float(values[world.initial_state])


@pytest.fixture(scope="module")
def small_run() -> dict:
    return _run(seed=0)


def test_it_improves_over_a_random_policy(small_run):
    world = LettingsWorld(scenario_by_slug(SCENARIO).persona)
    report = small_run["scenarios"][0]
    assert report["learned_return"] > _random_policy_return(world) + 2.0
    assert report["fraction_of_optimum"] > 0.8
    curve = small_run["learning_curve"]
    assert curve[-1]["mean_return"] > curve[0]["mean_return"] + 1.0


def test_it_clips_when_it_updates_several_times_per_batch(small_run):
    assert small_run["metrics"]["clip_fraction_mean"] > 0.0
    # With a single update per batch the ratio is 1 throughout: the clip can never bite.
    single = _run(seed=0, update_epochs=1)
    assert single["metrics"]["clip_fraction_mean"] == 0.0


def test_it_gives_the_same_result_for_the_same_seed(small_run):
    again = _run(seed=0)
    assert again["strategy"] == small_run["strategy"]
    assert again["learning_curve"] == small_run["learning_curve"]
    assert again["metrics"] == small_run["metrics"]


def test_it_returns_the_q_learning_result_shape(small_run):
    assert json.loads(json.dumps(small_run)) == small_run
    assert small_run["algorithm"] == "ppo"
    assert set(small_run["strategy"]["tables"]) == {SCENARIO}
    report = small_run["scenarios"][0]
    for key in ("optimal_return", "learned_return", "parent_return", "differing_moves"):
        assert key in report
