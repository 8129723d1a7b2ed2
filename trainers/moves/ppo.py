"""ppo over moves: a softmax policy over the eight moves, improved with PPO's clipped objective.

    python -m trainers.moves.ppo --spec spec.json --out result.json

The spec is q-learning-online's (see trainers.moves.q_learning)
with "algorithm": "ppo" and the knobs
of PPOConfig. The result has the same shape: a greedy table move strategy, per scenario the
exact learned, optimal and parent returns, the fraction of the optimum and the moves where it
differs, and a learning curve; plus PPO's own metrics (clip fraction, approximate KL, entropy).

The policy is tabular: one logit per (observable state, move), i.e. a linear policy on one-hot
state features, one per scenario (the persona is hidden, so each scenario is its own MDP). An
iteration samples `batch_episodes` calls from the current policy, computes returns-to-go, takes
advantages against a tabular value baseline (the running per-state mean of earlier batches'
returns) normalised within the batch, and then makes `update_epochs` Adam steps on

    mean_t [ min(ratio_t * A_t, clip(ratio_t, 1 - clip_range, 1 + clip_range) * A_t) ]
        + entropy_coef * mean_t [ H(pi(. | s_t)) ]

with ratio_t = pi(a_t | s_t) / pi_old(a_t | s_t). The first epoch starts at ratio 1; the later
ones move the ratio, and the clip stops a sample from pushing once its ratio has left the
band in the advantage's direction (the share of such samples is the clip fraction).

The same as the Wording card's PPO, only over moves and without a KL penalty to a base: the
policy starts uniform, and the clip is the only brake.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

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

ALGORITHM = "ppo"


# --- Config ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PPOConfig:
    iterations: int = knob(
        250,
        "Policy updates per scenario; each samples a fresh batch of calls.",
        minimum=1,
        maximum=100_000,
    )
    batch_episodes: int = knob(
        2048,
        "Calls sampled from the current policy per iteration.",
        minimum=1,
        maximum=65_536,
    )
    learning_rate: float = knob(
        0.05,
        "Adam step size on the logits.",
        minimum=0,
        maximum=10,
        exclusive_minimum=True,
    )
    clip_range: float = knob(
        0.2,
        "How far the probability ratio may move from 1 before a sample stops pushing.",
        minimum=0,
        maximum=1,
        exclusive_minimum=True,
    )
    update_epochs: int = knob(
        6,
        "Gradient steps on each batch; more than one, or the ratio is always 1 and the clip "
        "never bites.",
        minimum=1,
        maximum=100,
    )
    entropy_coef: float = knob(
        0.05,
        "Weight of the entropy bonus that keeps the policy exploring (measured: 0.05 beats "
        "0.01 and 0.1 on the default scenarios).",
        minimum=0,
        maximum=1,
    )
    discount: float = knob(
        1.0,
        "Discount of future reward in the returns-to-go.",
        minimum=0,
        maximum=1,
        exclusive_minimum=True,
    )
    time_budget_s: float = knob(
        90.0,
        "Wall-clock cap for the whole run, shared evenly by the scenarios; 0 means no cap.",
        minimum=0,
        maximum=3600,
    )
    seed: int = knob(
        0,
        "Seed of the numpy generator; with the scenario's own seed it fixes every draw.",
        minimum=0,
        maximum=2**32 - 1,
    )


# --- Policy helpers ----------------------------------------------------------------------


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@dataclass
class _Adam:
    """Adam for gradient ascent on one array (the logits)."""

    learning_rate: float
    first: np.ndarray
    second: np.ndarray
    steps: int = 0
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8

    def ascend(self, parameters: np.ndarray, gradient: np.ndarray) -> None:
        self.steps += 1
        self.first = self.beta1 * self.first + (1 - self.beta1) * gradient
        self.second = self.beta2 * self.second + (1 - self.beta2) * gradient**2
        first = self.first / (1 - self.beta1**self.steps)
        second = self.second / (1 - self.beta2**self.steps)
        parameters += self.learning_rate * first / (np.sqrt(second) + self.epsilon)


# --- PPO ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PPOOutcome:
    logits: np.ndarray
    """Policy logits, shape (S, A)."""
    visits: np.ndarray
    """Samples taken in each state over the training, shape (S,)."""
    curve_episodes: list[int]
    curve_returns: list[float]
    """Mean undiscounted return of each iteration's sampled calls."""
    clip_fractions: list[float]
    """Share of samples outside the clip band in each iteration's last epoch."""
    approx_kl: float
    entropy: float
    episodes_played: int


IterationReport = Callable[[int, int, dict[str, float]], None]


def learn_policy(
    world: LettingsWorld,
    config: PPOConfig,
    rng: np.random.Generator,
    *,
    time_budget_s: float = 0.0,
    on_iteration: IterationReport | None = None,
) -> PPOOutcome:
    n_states, n_actions, horizon = world.n_states, world.n_actions, world.max_turns
    logits = np.zeros((n_states, n_actions))
    optimiser = _Adam(config.learning_rate, np.zeros_like(logits), np.zeros_like(logits))
    baseline = np.zeros(n_states)
    baseline_seen = np.zeros(n_states, dtype=bool)
    visits = np.zeros(n_states)
    batch = config.batch_episodes
    curve_episodes: list[int] = []
    curve_returns: list[float] = []
    clip_fractions: list[float] = []
    approx_kl = entropy = 0.0
    started = time.perf_counter()

    for iteration in range(config.iterations):
        if time_budget_s > 0.0 and time.perf_counter() - started >= time_budget_s:
            break

        # --- rollouts: every call of the batch steps together; finished calls are inert ---
        states = np.empty((horizon, batch), dtype=np.int64)
        actions = np.empty((horizon, batch), dtype=np.int64)
        rewards = np.zeros((horizon, batch))
        live = np.empty((horizon, batch), dtype=bool)
        current = np.full(batch, world.initial_state, dtype=np.int64)
        # The policy is a table: its cumulative probabilities are worked out once per batch.
        cumulative = np.exp(_log_softmax(logits)).cumsum(axis=1)
        for turn in range(horizon):
            draws = rng.random(batch)[:, None]
            moves = (cumulative[current] < draws).sum(axis=1).clip(max=n_actions - 1)
            live[turn] = ~world.terminal_mask[current]
            states[turn], actions[turn] = current, moves
            current, rewards[turn], _finished = world.step_batch(current, moves, rng)

        # --- returns-to-go and advantages against the value baseline ---
        returns = np.zeros((horizon, batch))
        following = np.zeros(batch)
        for turn in reversed(range(horizon)):
            following = rewards[turn] + config.discount * following
            returns[turn] = following
        sample_states = states[live]
        sample_actions = actions[live]
        sample_returns = returns[live]
        advantages = sample_returns - np.where(
            baseline_seen[sample_states], baseline[sample_states], sample_returns.mean()
        )
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        counts = np.bincount(sample_states, minlength=n_states)
        sums = np.bincount(sample_states, weights=sample_returns, minlength=n_states)
        seen = counts > 0
        # A running mean per state: the baseline of the next batch, never of this one, so a
        # sample's own return never cancels its advantage.
        baseline[seen] = np.where(
            baseline_seen[seen],
            0.5 * baseline[seen] + 0.5 * sums[seen] / counts[seen],
            sums[seen] / counts[seen],
        )
        baseline_seen |= seen
        visits += counts

        # --- clipped surrogate: several epochs on the same batch so the ratio moves ---
        n_samples = len(sample_states)
        pairs = sample_states * n_actions + sample_actions
        old_log_probs = _log_softmax(logits).reshape(-1)[pairs]
        for _epoch in range(config.update_epochs):
            log_table = _log_softmax(logits)
            table = np.exp(log_table)
            ratio = np.exp(log_table.reshape(-1)[pairs] - old_log_probs)
            clipped = ((advantages > 0) & (ratio > 1 + config.clip_range)) | (
                (advantages < 0) & (ratio < 1 - config.clip_range)
            )
            # d/dlogits[s] of ratio * A is ratio * A * (onehot(a) - pi(.|s)), zero where
            # clipped; summed per state it is W(s, a) - W(s) * pi(.|s) with W the summed
            # weights, so the gradient is built on the (S, A) table, not per sample.
            weight = np.where(clipped, 0.0, ratio * advantages)
            by_pair = np.bincount(pairs, weights=weight, minlength=n_states * n_actions)
            by_pair = by_pair.reshape(n_states, n_actions)
            gradient = by_pair - by_pair.sum(axis=1, keepdims=True) * table
            # Entropy bonus per sample is its state's entropy: dH/dlogits = -pi (log pi + H).
            state_entropy = -(table * log_table).sum(axis=1)
            gradient += (
                config.entropy_coef
                * counts[:, None]
                * (-table * (log_table + state_entropy[:, None]))
            )
            optimiser.ascend(logits, gradient / n_samples)

        log_ratio = np.log(ratio)
        clip_fraction = float(np.mean(np.abs(ratio - 1.0) > config.clip_range))
        approx_kl = float(np.mean(ratio - 1.0 - log_ratio))
        entropy = float(np.average(state_entropy, weights=counts))
        clip_fractions.append(clip_fraction)
        curve_episodes.append((iteration + 1) * batch)
        curve_returns.append(float(rewards.sum(axis=0).mean()))
        if on_iteration is not None:
            on_iteration(
                iteration + 1,
                config.iterations,
                {
                    "mean_return": curve_returns[-1],
                    "clip_fraction": clip_fraction,
                    "approx_kl": approx_kl,
                    "entropy": entropy,
                },
            )

    return PPOOutcome(
        logits=logits,
        visits=visits,
        curve_episodes=curve_episodes,
        curve_returns=curve_returns,
        clip_fractions=clip_fractions,
        approx_kl=approx_kl,
        entropy=entropy,
        episodes_played=len(curve_episodes) * batch,
    )


# --- The run -----------------------------------------------------------------------------


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Train one policy per scenario with PPO and report the greedy tables exactly."""
    started = time.perf_counter()
    check_algorithm(spec, ALGORITHM)
    config: PPOConfig = config_from_knobs(
        PPOConfig, knobs_with_spec_seed(spec), algorithm=ALGORITHM
    )
    scenarios = scenarios_from_spec(spec)
    max_turns = max_turns_from_spec(spec)
    parent_strategy = spec.get("parent_strategy") or SCRIPTED
    per_scenario_budget = config.time_budget_s / len(scenarios)
    total_steps = config.iterations * len(scenarios)

    worlds, outcomes, curves = [], [], []
    for position, scenario in enumerate(scenarios):
        world = LettingsWorld(scenario.persona, max_turns=max_turns)
        offset = position * config.iterations

        def on_iteration(
            done: int, planned: int, metrics: dict[str, float], *, _slug=scenario.slug, _at=offset
        ) -> None:
            progress(
                _at + done,
                total_steps,
                scenario=_slug,
                **{name: round(value, 4) for name, value in metrics.items()},
            )

        outcome = learn_policy(
            world,
            config,
            scenario_rng(config.seed, scenario),
            time_budget_s=per_scenario_budget,
            on_iteration=on_iteration,
        )
        worlds.append(world)
        outcomes.append(outcome)
        curves.append(downsample_curve(outcome.curve_episodes, outcome.curve_returns))

    # --- greedy tables (most likely move), the default table, exact returns ---
    fallback_default = parent_policy(parent_strategy, scenario=None, max_turns=max_turns)
    default = default_table(
        [o.logits for o in outcomes], [o.visits for o in outcomes], fallback_default
    )
    tables: dict[str, np.ndarray] = {}
    reports = []
    for scenario, world, outcome, curve in zip(scenarios, worlds, outcomes, curves, strict=True):
        parent = parent_policy(parent_strategy, scenario=scenario.slug, max_turns=max_turns)
        table = table_from_scores(outcome.logits, outcome.visits > 0, parent)
        tables[scenario.slug] = table
        report = scenario_report(world, scenario, table, parent=parent, default=default)
        report["episodes"] = outcome.episodes_played
        report["learning_curve"] = curve
        report["metrics"] = _metrics(outcome)
        reports.append(report)

    progress(total_steps, total_steps, stage="done")
    per_scenario = [report["metrics"] for report in reports]
    return {
        "algorithm": ALGORITHM,
        "strategy": table_strategy(default, tables),
        "scenarios": reports,
        "summary": summarise(reports),
        "metrics": {
            name: float(np.mean([metrics[name] for metrics in per_scenario]))
            for name in per_scenario[0]
        },
        "learning_curve": mean_curve(curves),
        "curve": {"x": "episode", "y": "mean_return"},
        "knobs": asdict(config),
        "seed": config.seed,
        "max_turns": max_turns,
        "seconds": time.perf_counter() - started,
    }


def _metrics(outcome: PPOOutcome) -> dict[str, float]:
    fractions = outcome.clip_fractions or [0.0]
    return {
        "clip_fraction_mean": float(np.mean(fractions)),
        "clip_fraction_last": float(fractions[-1]),
        "approx_kl_last": outcome.approx_kl,
        "entropy_last": outcome.entropy,
        "iterations": float(len(outcome.clip_fractions)),
    }


def main(argv: list[str] | None = None) -> int:
    return trainer_main(
        run, argv, description="ppo: a softmax policy over moves, clipped objective"
    )


if __name__ == "__main__":
    raise SystemExit(main())
