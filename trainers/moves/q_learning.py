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
learner shares (``trainers.moves.common``), and the run itself is the pipeline q-learning-online
shares with ppo (``trainers.moves.tabular_run``): only ``learn_scenario`` is its own, so ppo and
reward-model report in the same shape; ``trainers.moves.engines`` is the registry over them.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.moves.common import knob, seed_knob
from trainers.moves.simulator import LettingsWorld
from trainers.moves.tabular_run import Learned, StepReport, run_tabular_learner
from trainers.registry import Q_LEARNING_ONLINE
from trainers.runtime import Progress, silent_progress, trainer_main

ALGORITHM = Q_LEARNING_ONLINE

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
    seed: int = seed_knob()


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


@dataclass
class _QTable:
    """Q(s, a) and its visit counts, with each state's best value and greedy move kept in
    step: a batch reads those for every call and turn, far more often than Q changes."""

    q_values: np.ndarray
    visits: np.ndarray
    best_values: np.ndarray
    best_moves: np.ndarray

    @classmethod
    def zeros(cls, n_states: int, n_actions: int) -> _QTable:
        q_values = np.zeros((n_states, n_actions))
        return cls(
            q_values=q_values,
            visits=np.zeros((n_states, n_actions)),
            best_values=q_values.max(axis=1),
            best_moves=q_values.argmax(axis=1),
        )

    def epsilon_greedy(
        self, states: np.ndarray, epsilon: float, rng: np.random.Generator
    ) -> np.ndarray:
        """A move for every live call at once: random with probability epsilon, else greedy."""
        greedy = self.best_moves[states]
        explore = rng.random(len(states)) < epsilon
        return np.where(explore, rng.integers(0, self.q_values.shape[1], len(states)), greedy)

    def td_update(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        targets: np.ndarray,
        config: QLearningConfig,
    ) -> None:
        """Move each (state, move) toward its targets at its visit-count step size."""
        n_states, n_actions = self.q_values.shape
        # Flat views: a (state, move) pair is one index, so a batch's updates are bincounts.
        flat_q = self.q_values.reshape(-1)
        flat_visits = self.visits.reshape(-1)
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
        self.best_values[changed] = self.q_values[changed].max(axis=1)
        self.best_moves[changed] = self.q_values[changed].argmax(axis=1)


def _epsilon(config: QLearningConfig, done_fraction: float) -> float:
    """Exploration falls linearly over the first part of the training, then stays."""
    decay = min(done_fraction / config.epsilon_decay_fraction, 1.0)
    return config.epsilon_start + (config.epsilon_end - config.epsilon_start) * decay


def _done_fraction(
    batch_index: int, n_batches: int, started: float, time_budget_s: float
) -> float | None:
    """How far the training is, by batches or by time whichever is further; None once the
    time budget is spent."""
    done_fraction = batch_index / n_batches
    if time_budget_s > 0.0:
        elapsed_fraction = (time.perf_counter() - started) / time_budget_s
        if elapsed_fraction >= 1.0:
            return None
        done_fraction = max(done_fraction, elapsed_fraction)
    return done_fraction


def _play_batch(
    world: LettingsWorld,
    table: _QTable,
    config: QLearningConfig,
    rng: np.random.Generator,
    *,
    size: int,
    epsilon: float,
) -> float:
    """Play `size` calls side by side, learning from every step; their mean return."""
    live = np.arange(size)  # which calls of the batch are still going
    states = np.full(size, world.initial_state, dtype=np.int64)
    returns = np.zeros(size)
    for _turn in range(world.max_turns):
        actions = table.epsilon_greedy(states, epsilon, rng)
        next_states, rewards, finished = world.step_batch(states, actions, rng)
        returns[live] += rewards
        # TD target: r + discount * max_a' Q(s', a'), 0 after the call ends.
        bootstrap = np.where(finished, 0.0, table.best_values[next_states])
        table.td_update(states, actions, rewards + config.discount * bootstrap, config)
        keep = ~finished
        live, states = live[keep], next_states[keep]
        if not len(states):
            break
    return float(returns.mean())


def batches_per_scenario(config: QLearningConfig) -> int:
    return math.ceil(config.episodes / min(config.batch_episodes, config.episodes))


def learn_q_table(
    world: LettingsWorld,
    config: QLearningConfig,
    rng: np.random.Generator,
    *,
    time_budget_s: float = 0.0,
    on_batch: BatchReport | None = None,
) -> QLearningOutcome:
    """One scenario's Q table from `config.episodes` simulated calls (or `time_budget_s`)."""
    table = _QTable.zeros(world.n_states, world.n_actions)
    batch = min(config.batch_episodes, config.episodes)
    n_batches = batches_per_scenario(config)
    curve_episodes: list[int] = []
    curve_returns: list[float] = []
    played = 0
    started = time.perf_counter()
    for batch_index in range(n_batches):
        done_fraction = _done_fraction(batch_index, n_batches, started, time_budget_s)
        if done_fraction is None:
            break
        epsilon = _epsilon(config, done_fraction)
        size = min(batch, config.episodes - played)
        mean_return = _play_batch(world, table, config, rng, size=size, epsilon=epsilon)
        played += size
        curve_episodes.append(played)
        curve_returns.append(mean_return)
        if on_batch is not None:
            on_batch(batch_index + 1, n_batches, float(epsilon), mean_return)
    return QLearningOutcome(
        q_values=table.q_values,
        visits=table.visits,
        curve_episodes=curve_episodes,
        curve_returns=curve_returns,
        episodes_played=played,
    )


# --- The run -----------------------------------------------------------------------------


def learn_scenario(
    world: LettingsWorld,
    config: QLearningConfig,
    rng: np.random.Generator,
    time_budget_s: float,
    report: StepReport,
) -> Learned:
    """One scenario's Q table, in the terms the tables and the report take."""

    def on_batch(done: int, planned: int, epsilon: float, mean_return: float) -> None:
        report(
            done,
            episodes=min(done * config.batch_episodes, config.episodes),
            epsilon=round(epsilon, 4),
            mean_return=round(mean_return, 4),
        )

    outcome = learn_q_table(world, config, rng, time_budget_s=time_budget_s, on_batch=on_batch)
    return Learned(
        scores=outcome.q_values,
        state_visits=outcome.visits.sum(axis=1),
        episodes=outcome.episodes_played,
        curve_episodes=outcome.curve_episodes,
        curve_returns=outcome.curve_returns,
    )


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Train one Q table per scenario and report them exactly (see the module docstring)."""
    return run_tabular_learner(
        spec,
        progress,
        algorithm=ALGORITHM,
        config_type=QLearningConfig,
        steps_each=batches_per_scenario,
        learn=learn_scenario,
    )


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description="q-learning-online: a move table on the simulator")


if __name__ == "__main__":
    raise SystemExit(main())
