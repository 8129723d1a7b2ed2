"""q-learning-online: tabular Q-learning of a move strategy on the lettings simulator.

    python -m trainers.moves.q_learning --spec spec.json --out result.json

The spec (plain JSON):
    {"algorithm": "q-learning-online",
     "knobs": {"episodes": 2000000, ...},        # any subset; see QLearningConfig
     "scenarios": ["family-relocating", ...],    # or [{"slug", "persona", "seed"}];
                                                 # default: every default scenario
     "max_turns": 8,
     "seed": 0,                                  # the knob "seed" wins if given
     "parent_strategy": {"kind": "scripted"}}    # the parent version's moves

What it learns. The persona is hidden, so every scenario is its own MDP over the observable
state: one Q table per scenario, learned from simulated calls played side by side (a batch of
episodes stepped together with ``LettingsWorld.step_batch``). The version also needs a
``default`` table for customers it has no scenario for: per state, the best move of the
scenarios' Q values averaged with weights in proportion to how often each scenario's training
reached that state (QMDP on that belief; see ``default_table``). States
no training episode ever reached keep the parent's move, so the new version differs from its
parent only where it learned something.

How it is measured. Every scenario's greedy table is evaluated exactly (policy evaluation on
the simulator's transition model) and set against value iteration's optimum and the parent's
exact return. ``fraction_of_optimum`` is learned / optimal, defined only when the optimum is
positive (a ratio of two negative returns reads backwards); ``gap_to_optimum`` (optimal -
learned, >= 0) is always there.

The spec's scenarios, the knobs' checks, the tables and the exact report are what every move
learner shares (``trainers.moves.common``), so ``move_ppo`` and ``move_reward_model`` report in
the same shape; ``trainers.moves.engines`` is the registry over them.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainers.moves.common import (
    check_algorithm,
    config_from_knobs,
    default_table,
    downsample_curve,
    knob,
    knobs_with_spec_seed,
    max_turns_from_spec,
    mean_curve,
    parent_policy,
    scenario_report,
    scenario_rng,
    scenarios_from_spec,
    summarise,
    table_from_scores,
    table_strategy,
)
from trainers.moves.simulator import LettingsWorld
from trainers.moves.strategy import SCRIPTED
from trainers.runtime import Progress, silent_progress, trainer_main

ALGORITHM = "q-learning-online"

# --- Config ------------------------------------------------------------------------------


@dataclass(frozen=True)
class QLearningConfig:
    episodes: int = knob(
        2_000_000,
        "Simulated calls per scenario (measured: about 2 s a scenario on one core).",
        minimum=1,
        maximum=50_000_000,
    )
    time_budget_s: float = knob(
        90.0,
        "Wall-clock cap for the whole run, shared evenly by the scenarios; 0 means no cap. "
        "Exploration decays over whichever of episodes or time runs out first.",
        minimum=0,
        maximum=3600,
    )
    batch_episodes: int = knob(
        4096,
        "Calls played side by side per batch (one vectorised step for all of them).",
        minimum=1,
        maximum=65_536,
    )
    learning_rate: float = knob(
        1.0,
        "Step size scale: each (state, move) learns at learning_rate / visits ** "
        "learning_rate_decay, capped at 1.",
        minimum=0,
        maximum=1,
        exclusive_minimum=True,
    )
    learning_rate_decay: float = knob(
        0.7,
        "Exponent of the visit-count schedule: 0 keeps the rate constant, 1 averages every "
        "target equally; between 0.5 and 1 Q-learning converges and forgets early guesses.",
        minimum=0,
        maximum=1,
    )
    discount: float = knob(
        1.0,
        "Discount of future reward; the call always ends within max_turns, so 1 is well "
        "defined and is what the optimum is measured in.",
        minimum=0,
        maximum=1,
        exclusive_minimum=True,
    )
    epsilon_start: float = knob(
        1.0,
        "Share of random moves at the start of training (exploration).",
        minimum=0,
        maximum=1,
    )
    epsilon_end: float = knob(
        0.05,
        "Share of random moves once exploration has decayed; some randomness keeps every "
        "move's value fresh.",
        minimum=0,
        maximum=1,
    )
    epsilon_decay_fraction: float = knob(
        0.5,
        "Fraction of the training over which exploration falls linearly from start to end.",
        minimum=0,
        maximum=1,
        exclusive_minimum=True,
    )
    seed: int = knob(
        0,
        "Seed of the numpy generator; with the scenario's own seed it fixes every draw.",
        minimum=0,
        maximum=2**32 - 1,
    )


# --- Q-learning --------------------------------------------------------------------------


@dataclass(frozen=True)
class QLearningOutcome:
    q_values: np.ndarray
    """Q(s, a), shape (S, A)."""
    visits: np.ndarray
    """Updates made to each (s, a), shape (S, A)."""
    curve_episodes: list[int]
    """Episodes played after each batch."""
    curve_returns: list[float]
    """Mean undiscounted return of each batch's calls (exploration included)."""
    episodes_played: int


BatchReport = Callable[[int, int, float, float], None]
"""(batches done, batches planned, epsilon, mean return of the batch)."""


def learn_q_table(
    world: LettingsWorld,
    config: QLearningConfig,
    rng: np.random.Generator,
    *,
    time_budget_s: float = 0.0,
    on_batch: BatchReport | None = None,
) -> QLearningOutcome:
    """One scenario's Q table from `config.episodes` simulated calls (or `time_budget_s`)."""
    n_states, n_actions = world.n_states, world.n_actions
    q_values = np.zeros((n_states, n_actions))
    visits = np.zeros((n_states, n_actions))
    # Flat views: a (state, move) pair is one index, so a batch's updates are bincounts.
    flat_q = q_values.reshape(-1)
    flat_visits = visits.reshape(-1)
    # Each state's best value and greedy move, refreshed only where an update landed: the
    # batch reads them for every call and turn, far more often than Q changes per state.
    best_values = q_values.max(axis=1)
    best_moves = q_values.argmax(axis=1)
    batch = min(config.batch_episodes, config.episodes)
    n_batches = math.ceil(config.episodes / batch)
    curve_episodes: list[int] = []
    curve_returns: list[float] = []
    played = 0
    started = time.perf_counter()

    for batch_index in range(n_batches):
        # --- exploration schedule: linear decay over the first part of the training ---
        done_fraction = batch_index / n_batches
        if time_budget_s > 0.0:
            elapsed_fraction = (time.perf_counter() - started) / time_budget_s
            if elapsed_fraction >= 1.0:
                break
            done_fraction = max(done_fraction, elapsed_fraction)
        decay = min(done_fraction / config.epsilon_decay_fraction, 1.0)
        epsilon = config.epsilon_start + (config.epsilon_end - config.epsilon_start) * decay

        size = min(batch, config.episodes - played)
        live = np.arange(size)  # which calls of the batch are still going
        states = np.full(size, world.initial_state, dtype=np.int64)
        returns = np.zeros(size)
        for _turn in range(world.max_turns):
            # --- epsilon-greedy moves for every live call at once ---
            greedy = best_moves[states]
            explore = rng.random(len(states)) < epsilon
            actions = np.where(explore, rng.integers(0, n_actions, len(states)), greedy)
            next_states, rewards, finished = world.step_batch(states, actions, rng)
            returns[live] += rewards

            # --- TD update: target r + discount * max_a' Q(s', a'), 0 after the call ends ---
            bootstrap = np.where(finished, 0.0, best_values[next_states])
            targets = rewards + config.discount * bootstrap
            pairs = states * n_actions + actions
            counts = np.bincount(pairs, minlength=n_states * n_actions)
            sums = np.bincount(pairs, weights=targets, minlength=n_states * n_actions)
            touched = np.flatnonzero(counts)
            repeats = counts[touched]
            flat_visits[touched] += repeats
            rate = np.minimum(
                1.0, config.learning_rate / flat_visits[touched] ** config.learning_rate_decay
            )
            # k samples of one pair in a batch act as k sequential steps toward their mean
            # target: the kept share of the old value is (1 - rate) ** k.
            step = 1.0 - (1.0 - rate) ** repeats
            flat_q[touched] += step * (sums[touched] / repeats - flat_q[touched])
            changed = np.unique(touched // n_actions)
            best_values[changed] = q_values[changed].max(axis=1)
            best_moves[changed] = q_values[changed].argmax(axis=1)

            keep = ~finished
            live, states = live[keep], next_states[keep]
            if not len(states):
                break

        played += size
        curve_episodes.append(played)
        curve_returns.append(float(returns.mean()))
        if on_batch is not None:
            on_batch(batch_index + 1, n_batches, float(epsilon), curve_returns[-1])

    return QLearningOutcome(
        q_values=q_values,
        visits=visits,
        curve_episodes=curve_episodes,
        curve_returns=curve_returns,
        episodes_played=played,
    )


# --- The run -----------------------------------------------------------------------------


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Train one Q table per scenario and report them exactly (see the module docstring)."""
    started = time.perf_counter()
    check_algorithm(spec, ALGORITHM)
    config: QLearningConfig = config_from_knobs(
        QLearningConfig, knobs_with_spec_seed(spec), algorithm=ALGORITHM
    )
    scenarios = scenarios_from_spec(spec)
    max_turns = max_turns_from_spec(spec)
    parent_strategy = spec.get("parent_strategy") or SCRIPTED
    per_scenario_budget = config.time_budget_s / len(scenarios)
    batches_each = math.ceil(config.episodes / min(config.batch_episodes, config.episodes))
    total_steps = batches_each * len(scenarios)

    worlds, outcomes, curves = [], [], []
    for position, scenario in enumerate(scenarios):
        world = LettingsWorld(scenario.persona, max_turns=max_turns)

        def on_batch(
            done: int,
            planned: int,
            epsilon: float,
            mean_return: float,
            *,
            _slug=scenario.slug,
            _offset=position * batches_each,
        ) -> None:
            progress(
                _offset + done,
                total_steps,
                scenario=_slug,
                episodes=min(done * config.batch_episodes, config.episodes),
                epsilon=round(epsilon, 4),
                mean_return=round(mean_return, 4),
            )

        outcome = learn_q_table(
            world,
            config,
            scenario_rng(config.seed, scenario),
            time_budget_s=per_scenario_budget,
            on_batch=on_batch,
        )
        worlds.append(world)
        outcomes.append(outcome)
        curves.append(downsample_curve(outcome.curve_episodes, outcome.curve_returns))

    # --- greedy tables, the default table, and their exact returns ---
    fallback_default = parent_policy(parent_strategy, scenario=None, max_turns=max_turns)
    state_visits = [outcome.visits.sum(axis=1) for outcome in outcomes]
    visited = [visits > 0 for visits in state_visits]
    default = default_table([o.q_values for o in outcomes], state_visits, fallback_default)
    tables: dict[str, np.ndarray] = {}
    reports = []
    for scenario, world, outcome, seen, curve in zip(
        scenarios, worlds, outcomes, visited, curves, strict=True
    ):
        parent = parent_policy(parent_strategy, scenario=scenario.slug, max_turns=max_turns)
        table = table_from_scores(outcome.q_values, seen, parent)
        tables[scenario.slug] = table
        report = scenario_report(world, scenario, table, parent=parent, default=default)
        report["episodes"] = outcome.episodes_played
        report["learning_curve"] = curve
        reports.append(report)

    progress(total_steps, total_steps, stage="done")
    return {
        "algorithm": ALGORITHM,
        "strategy": table_strategy(default, tables),
        "scenarios": reports,
        "summary": summarise(reports),
        "learning_curve": mean_curve(curves),
        "curve": {"x": "episode", "y": "mean_return"},
        "knobs": asdict(config),
        "seed": config.seed,
        "max_turns": max_turns,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description="q-learning-online: a move table on the simulator")


if __name__ == "__main__":
    raise SystemExit(main())
