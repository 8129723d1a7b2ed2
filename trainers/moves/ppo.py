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
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.moves.common import knob, seed_knob
from trainers.moves.simulator import LettingsWorld
from trainers.moves.tabular_run import Learned, StepReport, run_tabular_learner
from trainers.registry import PPO
from trainers.runtime import Progress, silent_progress, trainer_main

ALGORITHM = PPO


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
    seed: int = seed_knob()


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


@dataclass(frozen=True)
class _Rollouts:
    """A batch of calls sampled from the policy, turn-major: shape (max_turns, batch)."""

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    live: np.ndarray
    """Whether the call was still going at that turn (finished calls are inert)."""


def _sample_calls(
    world: LettingsWorld, logits: np.ndarray, batch: int, rng: np.random.Generator
) -> _Rollouts:
    """`batch` calls from the current policy; every call of the batch steps together."""
    horizon, n_actions = world.max_turns, world.n_actions
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
    return _Rollouts(states=states, actions=actions, rewards=rewards, live=live)


def _returns_to_go(rewards: np.ndarray, discount: float) -> np.ndarray:
    returns = np.zeros_like(rewards)
    following = np.zeros(rewards.shape[1])
    for turn in reversed(range(len(rewards))):
        following = rewards[turn] + discount * following
        returns[turn] = following
    return returns


@dataclass
class _ValueBaseline:
    """A running mean of the returns from each state: the baseline of the next batch, never
    of this one, so a sample's own return never cancels its advantage."""

    values: np.ndarray
    seen: np.ndarray

    @classmethod
    def empty(cls, n_states: int) -> _ValueBaseline:
        return cls(values=np.zeros(n_states), seen=np.zeros(n_states, dtype=bool))

    def advantages(self, states: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """Returns less the baseline (the batch mean where a state has none), normalised."""
        advantages = returns - np.where(self.seen[states], self.values[states], returns.mean())
        return (advantages - advantages.mean()) / (advantages.std() + 1e-8)

    def update(self, states: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """Fold this batch's returns in; the samples counted per state, shape (S,)."""
        n_states = len(self.values)
        counts = np.bincount(states, minlength=n_states)
        sums = np.bincount(states, weights=returns, minlength=n_states)
        seen = counts > 0
        self.values[seen] = np.where(
            self.seen[seen],
            0.5 * self.values[seen] + 0.5 * sums[seen] / counts[seen],
            sums[seen] / counts[seen],
        )
        self.seen |= seen
        return counts


@dataclass(frozen=True)
class _LastEpoch:
    ratio: np.ndarray
    """pi(a_t | s_t) / pi_old(a_t | s_t) per sample, before the last step."""
    state_entropy: np.ndarray
    """H(pi(. | s)) per state, shape (S,)."""


def _clipped_updates(
    logits: np.ndarray,
    optimiser: _Adam,
    pairs: np.ndarray,
    advantages: np.ndarray,
    counts: np.ndarray,
    config: PPOConfig,
) -> _LastEpoch:
    """`update_epochs` steps on the clipped surrogate plus the entropy bonus, on one batch:
    several, so the ratio moves and the clip can bite."""
    n_states, n_actions = logits.shape
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
            config.entropy_coef * counts[:, None] * (-table * (log_table + state_entropy[:, None]))
        )
        optimiser.ascend(logits, gradient / len(pairs))
    return _LastEpoch(ratio=ratio, state_entropy=state_entropy)


def _epoch_metrics(last: _LastEpoch, counts: np.ndarray, clip_range: float) -> dict[str, float]:
    log_ratio = np.log(last.ratio)
    return {
        "clip_fraction": float(np.mean(np.abs(last.ratio - 1.0) > clip_range)),
        "approx_kl": float(np.mean(last.ratio - 1.0 - log_ratio)),
        "entropy": float(np.average(last.state_entropy, weights=counts)),
    }


def _ppo_iteration(
    world: LettingsWorld,
    logits: np.ndarray,
    optimiser: _Adam,
    baseline: _ValueBaseline,
    config: PPOConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, float]]:
    """Sample a batch, take advantages, improve the policy: (samples per state, metrics)."""
    calls = _sample_calls(world, logits, config.batch_episodes, rng)
    returns = _returns_to_go(calls.rewards, config.discount)
    sample_states = calls.states[calls.live]
    sample_returns = returns[calls.live]
    advantages = baseline.advantages(sample_states, sample_returns)
    counts = baseline.update(sample_states, sample_returns)
    pairs = sample_states * world.n_actions + calls.actions[calls.live]
    last = _clipped_updates(logits, optimiser, pairs, advantages, counts, config)
    metrics = {
        "mean_return": float(calls.rewards.sum(axis=0).mean()),
        **_epoch_metrics(last, counts, config.clip_range),
    }
    return counts, metrics


def learn_policy(
    world: LettingsWorld,
    config: PPOConfig,
    rng: np.random.Generator,
    *,
    time_budget_s: float = 0.0,
    on_iteration: IterationReport | None = None,
) -> PPOOutcome:
    logits = np.zeros((world.n_states, world.n_actions))
    optimiser = _Adam(config.learning_rate, np.zeros_like(logits), np.zeros_like(logits))
    baseline = _ValueBaseline.empty(world.n_states)
    visits = np.zeros(world.n_states)
    batch = config.batch_episodes
    curve_episodes: list[int] = []
    curve_returns: list[float] = []
    clip_fractions: list[float] = []
    metrics = {"approx_kl": 0.0, "entropy": 0.0}
    started = time.perf_counter()
    for iteration in range(config.iterations):
        if time_budget_s > 0.0 and time.perf_counter() - started >= time_budget_s:
            break
        counts, metrics = _ppo_iteration(world, logits, optimiser, baseline, config, rng)
        visits += counts
        clip_fractions.append(metrics["clip_fraction"])
        curve_episodes.append((iteration + 1) * batch)
        curve_returns.append(metrics["mean_return"])
        if on_iteration is not None:
            on_iteration(iteration + 1, config.iterations, metrics)
    return PPOOutcome(
        logits=logits,
        visits=visits,
        curve_episodes=curve_episodes,
        curve_returns=curve_returns,
        clip_fractions=clip_fractions,
        approx_kl=metrics["approx_kl"],
        entropy=metrics["entropy"],
        episodes_played=len(curve_episodes) * batch,
    )


# --- The run -----------------------------------------------------------------------------


def learn_scenario(
    world: LettingsWorld,
    config: PPOConfig,
    rng: np.random.Generator,
    time_budget_s: float,
    report: StepReport,
) -> Learned:
    """One scenario's policy; its greedy table is the most likely move per state."""

    def on_iteration(done: int, planned: int, metrics: dict[str, float]) -> None:
        report(done, **{name: round(value, 4) for name, value in metrics.items()})

    outcome = learn_policy(
        world, config, rng, time_budget_s=time_budget_s, on_iteration=on_iteration
    )
    return Learned(
        scores=outcome.logits,
        state_visits=outcome.visits,
        episodes=outcome.episodes_played,
        curve_episodes=outcome.curve_episodes,
        curve_returns=outcome.curve_returns,
        metrics=_metrics(outcome),
    )


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Train one policy per scenario with PPO and report the greedy tables exactly."""
    return run_tabular_learner(
        spec,
        progress,
        algorithm=ALGORITHM,
        config_type=PPOConfig,
        steps_each=lambda config: config.iterations,
        learn=learn_scenario,
    )


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
