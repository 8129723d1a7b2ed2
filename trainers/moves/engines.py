"""The Engines registry: the move learners, their knobs, and one entry point to run any of them.

    ALGORITHMS[Q_LEARNING_ONLINE | REWARD_MODEL | PPO] -> Engine(config, run, module, ...)
    validate_knobs(algorithm, knobs) -> Config         raises KnobError before anything runs
    validate_spec(spec) -> Config                      the knobs plus scenarios, max_turns, source
    knob_help(algorithm) -> [{name, type, default, help, min, max, ...}]   for the form
    run_algorithm(spec, progress) -> dict              the chosen trainer's plain-value result

Each trainer also runs headless: `python -m <Engine.module> --spec spec.json --out out.json`;
the module and the label are the ones the catalogue (``trainers.registry``) keeps for the
learner's name.

Pure Python; never imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from trainers.moves import ppo as move_ppo
from trainers.moves import q_learning
from trainers.moves import reward_model as move_reward_model
from trainers.moves.common import (
    KnobError,
    config_from_knobs,
    knob_rows,
    knobs_with_spec_seed,
    max_turns_from_spec,
    scenarios_from_spec,
)
from trainers.registry import TRAINERS
from trainers.runtime import Progress, silent_progress

__all__ = [
    "ALGORITHMS",
    "Engine",
    "KnobError",
    "knob_help",
    "run_algorithm",
    "validate_knobs",
    "validate_spec",
]


@dataclass(frozen=True)
class Engine:
    name: str
    label: str
    summary: str
    config: type
    run: Callable[..., dict[str, Any]]
    module: str
    """What `python -m` runs for this engine."""


def _engine(learner: ModuleType, *, config: type, summary: str) -> Engine:
    """A learner's entry: its name and run from its module, its module and label from the
    catalogue."""
    catalogued = TRAINERS[learner.ALGORITHM]
    return Engine(
        name=catalogued.name,
        label=catalogued.engines_label,
        summary=summary,
        config=config,
        run=learner.run,
        module=catalogued.module,
    )


ALGORITHMS: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        _engine(
            q_learning,
            config=q_learning.QLearningConfig,
            summary="A table of move values per scenario, learned from simulated calls; "
            "its greedy moves are measured exactly against the optimum.",
        ),
        _engine(
            move_reward_model,
            config=move_reward_model.RewardModelConfig,
            summary="A readable reward on move sequences, fitted from picks (Bradley-Terry) or "
            "from real-call outcomes (logistic), held out by call.",
        ),
        _engine(
            move_ppo,
            config=move_ppo.PPOConfig,
            summary="A softmax policy over moves per scenario, improved with the clipped "
            "objective on simulated calls.",
        ),
    )
}


def engine_for(algorithm: Any) -> Engine:
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise KnobError(
            f"unknown algorithm {algorithm!r}; known algorithms: {', '.join(ALGORITHMS)}",
            knob="algorithm",
        )
    return ALGORITHMS[algorithm]


def validate_knobs(algorithm: str, knobs: Mapping[str, Any] | None) -> Any:
    """The algorithm's frozen Config from plain knob values, or KnobError naming the knob."""
    engine = engine_for(algorithm)
    return config_from_knobs(engine.config, knobs, algorithm=engine.name)


def validate_spec(spec: Mapping[str, Any]) -> Any:
    """Everything a run checks before it starts, checked up front: the algorithm, the knobs
    (with the spec's seed), the scenarios and max_turns, and for the reward model its source
    and examples. Returns the Config."""
    if not isinstance(spec, Mapping):
        raise KnobError("the spec must be an object")
    engine = engine_for(spec.get("algorithm"))
    config = config_from_knobs(engine.config, knobs_with_spec_seed(spec), algorithm=engine.name)
    if engine.name == move_reward_model.ALGORITHM:
        # Reads every example (moves known, labels present) and that two calls can be split.
        examples = move_reward_model.examples_from_spec(
            spec.get("source", "picks"), spec.get("examples") or []
        )
        move_reward_model.split_by_group(
            examples.groups, config.holdout_fraction, np.random.default_rng(config.seed)
        )
        if not config.plan_strategy:
            return config
    scenarios_from_spec(spec)
    max_turns_from_spec(spec)
    return config


def knob_help(algorithm: str) -> list[dict[str, Any]]:
    """One row per knob: name, type, default, help, min, max (and whether a bound is strict)."""
    return knob_rows(engine_for(algorithm).config)


def run_algorithm(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Validate the spec, then run its algorithm; the result is the trainer's plain values."""
    validate_spec(spec)
    return engine_for(spec.get("algorithm")).run(spec, progress=progress)
