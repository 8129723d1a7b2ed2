"""reward-model over moves: a readable reward on move sequences, from picks or from outcomes.

    python -m trainers.moves.reward_model --spec spec.json --out result.json

The spec (plain JSON):
    {"algorithm": "reward-model",
     "source": "picks" | "outcomes",
     "examples": [...],
     "knobs": {...},                       # see RewardModelConfig
     "seed": 0,
     "scenarios": [...], "max_turns": 8, "parent_strategy": {...}}   # for the planned strategy

Examples.
  picks:    {"id", "group"?, "sequence_a": [move, ...], "sequence_b": [...], "a_preferred": bool}
            (or "preferred": "a" | "b"; or a bare [sequence_a, sequence_b, a_preferred])
  outcomes: {"id", "moves": [move, ...], "won": bool}, or a recorded call
            {"id", "outcome": "won" | "lost", "turns": [{"speaker", "text", "move"?}]} whose
            agent turns without a move are labelled by trainers.moves.labels.

The model. Every sequence becomes a vector of named features (FEATURES: how often each move is
made, which move opens, which move directly follows which, and a few order facts such as
"reassured before proposing the viewing"). Picks are fitted with the Bradley-Terry loss,
P(a preferred) = sigmoid(w . (phi(a) - phi(b))); outcomes with the logistic loss,
P(won) = sigmoid(w . phi + b). Full-batch gradient descent on standardised features with an L2
penalty; the weights are reported back in the features' own units (the change in log-odds per
extra move, or for having the fact), largest first, so a reviewer can read what was learned.

Held out. A tenth of the examples (`holdout_fraction`), split by group: an example's "group"
(the call a pick came from) or else its "id", so no call is on both sides. Held-out accuracy,
AUC and log loss over the whole held-out set are reported, with the ids on each side.

The strategy (optional, `plan_strategy`). The simulator's state does not remember earlier
moves, so only the Markov part of the learned reward is used: a move's count weight, plus its
opening weight at the first turn. Each scenario is then planned exactly (value iteration) on
the simulator's reward plus `shaping_weight` times that learned reward, and the planned table
is reported against the TRUE simulator reward (optimum, parent, fraction, differing moves), so
the page shows where the learned reward pulls the agent away from the best calls.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainers.moves.common import (
    KnobError,
    check_algorithm,
    config_from_knobs,
    default_table,
    knob,
    knobs_with_spec_seed,
    max_turns_from_spec,
    occupancy,
    parent_policy,
    scenario_report,
    scenarios_from_spec,
    seed_knob,
    summarise,
    table_from_scores,
    table_strategy,
)
from trainers.moves.labels import label_agent_turns
from trainers.moves.simulator import MOVE_INDEX, MOVES, N_ACTIONS, LettingsWorld, describe_state
from trainers.moves.strategy import SCRIPTED
from trainers.moves.value_iteration import value_iteration
from trainers.registry import REWARD_MODEL
from trainers.runtime import Progress, silent_progress, trainer_main
from trainers.stats.auc import auc
from trainers.stats.logistic import LinearLogits, log_loss, logistic_descent, sigmoid

ALGORITHM = REWARD_MODEL
SOURCES = ("picks", "outcomes")

# --- Config ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardModelConfig:
    epochs: int = knob(
        400, "Full-batch gradient steps of the logistic fit.", minimum=1, maximum=100_000
    )
    learning_rate: float = knob(
        0.5,
        "Gradient step size (the features are standardised, so 0.1 to 1 is a sane range).",
        minimum=0,
        maximum=10,
        exclusive_minimum=True,
    )
    l2: float = knob(
        0.1,
        "L2 penalty on the standardised weights; keeps rare features from running away.",
        minimum=0,
        maximum=100,
    )
    holdout_fraction: float = knob(
        0.1,
        "Share of groups (calls) held out for accuracy and AUC.",
        minimum=0,
        maximum=0.5,
        exclusive_minimum=True,
    )
    plan_strategy: bool = knob(
        True,
        "Also plan a move strategy on the simulator with the learned reward as shaping.",
    )
    shaping_weight: float = knob(
        1.0,
        "Scale of the learned reward (log-odds) added to the simulator's reward when planning.",
        minimum=0,
        maximum=100,
    )
    seed: int = seed_knob("Seed of the numpy generator that picks the held-out groups.")


# --- Features of a move sequence ---------------------------------------------------------


def _feature_table() -> list[tuple[str, str]]:
    rows = [(f"count:{m}", f"each time the agent makes '{m}'") for m in MOVES]
    rows += [(f"first:{m}", f"the call opens with '{m}'") for m in MOVES]
    rows += [(f"then:{a}>{b}", f"'{b}' comes right after '{a}'") for a in MOVES for b in MOVES]
    rows += [
        ("order:reassure<propose_viewing", "reassured before first proposing the viewing"),
        ("order:propose_viewing_unreassured", "proposed the viewing with no reassurance before"),
        ("order:handle_objection<propose_viewing", "handled an objection before the viewing"),
        ("length", "each move in the call"),
    ]
    return rows


FEATURES: tuple[tuple[str, str], ...] = tuple(_feature_table())
"""(name, what it counts), in the order of the feature vector."""
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _help in FEATURES)
_COUNT, _FIRST, _THEN = 0, N_ACTIONS, 2 * N_ACTIONS
_ORDER = _THEN + N_ACTIONS * N_ACTIONS


def sequence_features(moves: Sequence[str]) -> np.ndarray:
    """The feature vector of one move sequence (see FEATURES)."""
    unknown = [move for move in moves if move not in MOVE_INDEX]
    if unknown:
        raise KnobError(
            f"unknown move(s) {', '.join(map(repr, unknown))}; moves: {', '.join(MOVES)}",
            knob="examples",
        )
    indices = [MOVE_INDEX[move] for move in moves]
    features = np.zeros(len(FEATURE_NAMES))
    for index in indices:
        features[_COUNT + index] += 1.0
    if indices:
        features[_FIRST + indices[0]] = 1.0
    for before, after in zip(indices, indices[1:], strict=False):
        features[_THEN + before * N_ACTIONS + after] = 1.0
    viewing = moves.index("propose_viewing") if "propose_viewing" in moves else None
    if viewing is not None:
        earlier = moves[:viewing]
        features[_ORDER] = float("reassure" in earlier)
        features[_ORDER + 1] = float("reassure" not in earlier)
        features[_ORDER + 2] = float("handle_objection" in earlier)
    features[_ORDER + 3] = float(len(moves))
    return features


# --- Examples from the spec --------------------------------------------------------------


@dataclass(frozen=True)
class Examples:
    """The design matrix: rows x, labels y in {0, 1}, and the group of each row."""

    rows: np.ndarray
    labels: np.ndarray
    ids: list[str]
    groups: list[str]


def _moves_of_call(example: Mapping[str, Any]) -> list[str]:
    if "moves" in example:
        return [str(move) for move in example["moves"]]
    turns = example.get("turns") or []
    labels = label_agent_turns(turns)
    moves = []
    for turn, label in zip(turns, labels, strict=True):
        if label is None:
            continue
        given = turn.get("move") or turn.get("move_label")
        moves.append(str(given) if given else label[0])
    return moves


def examples_from_spec(source: str, examples: Sequence[Any]) -> Examples:
    """Feature rows from picks (phi(a) - phi(b), label a_preferred) or outcomes (phi, won)."""
    if source not in SOURCES:
        raise KnobError(
            f"source must be one of {', '.join(SOURCES)}; got {source!r}", knob="source"
        )
    if not isinstance(examples, Sequence) or isinstance(examples, str) or not examples:
        raise KnobError("examples must be a non-empty list", knob="examples")
    rows, labels, ids, groups = [], [], [], []
    for position, example in enumerate(examples):
        if source == "picks":
            if isinstance(example, Sequence) and not isinstance(example, str | Mapping):
                example = dict(
                    zip(("sequence_a", "sequence_b", "a_preferred"), example, strict=False)
                )
            if not isinstance(example, Mapping) or not {"sequence_a", "sequence_b"} <= set(example):
                raise KnobError(
                    f"pick {position} needs sequence_a, sequence_b and a_preferred", knob="examples"
                )
            if "a_preferred" in example:
                preferred = example["a_preferred"]
            else:
                preferred = {"a": True, "b": False}.get(example.get("preferred"))
            if not isinstance(preferred, bool):
                raise KnobError(
                    f"pick {position}: a_preferred must be true or false", knob="examples"
                )
            row = sequence_features(example["sequence_a"]) - sequence_features(
                example["sequence_b"]
            )
            label = float(preferred)
        else:
            if not isinstance(example, Mapping):
                raise KnobError(f"outcome {position} must be an object", knob="examples")
            won = example.get("won")
            if won is None and example.get("outcome") in ("won", "lost"):
                won = example["outcome"] == "won"
            if not isinstance(won, bool):
                raise KnobError(
                    f"outcome {position} needs won (true/false) or outcome (won/lost)",
                    knob="examples",
                )
            row = sequence_features(_moves_of_call(example))
            label = float(won)
        identifier = str(example.get("id", position))
        rows.append(row)
        labels.append(label)
        ids.append(identifier)
        groups.append(str(example.get("group") or example.get("call_id") or identifier))
    return Examples(np.stack(rows), np.array(labels), ids, groups)


def split_by_group(
    groups: Sequence[str], fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (train, held out): a `fraction` of the groups (at least one) held out
    whole, so no group (call) has rows on both sides."""
    unique = sorted(set(groups))
    if len(unique) < 2:
        raise KnobError(
            "need examples from at least two calls (groups) to hold one out", knob="examples"
        )
    count = min(max(1, math.ceil(fraction * len(unique))), len(unique) - 1)
    held = set(rng.permutation(unique)[:count].tolist())
    held_out = np.array([group in held for group in groups])
    return ~held_out, held_out


# --- Fit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    weights: np.ndarray
    """Per feature, in the features' own units (log-odds per unit)."""
    bias: float
    curve: list[dict[str, float]]


def fit_move_reward(
    rows: np.ndarray,
    labels: np.ndarray,
    config: RewardModelConfig,
    *,
    with_bias: bool,
    held_rows: np.ndarray,
    held_labels: np.ndarray,
) -> Fit:
    """Logistic (Bradley-Terry without bias) fit by gradient descent on standardised features."""
    # Picks are differences phi(a) - phi(b): centring them would break the symmetry
    # P(a over b) = 1 - P(b over a), so only outcomes are centred.
    centre = rows.mean(axis=0) if with_bias else np.zeros(rows.shape[1])
    scale = rows.std(axis=0) if with_bias else np.sqrt((rows**2).mean(axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    standard = (rows - centre) / scale
    held_standard = (held_rows - centre) / scale
    curve: list[dict[str, float]] = []
    every = max(1, config.epochs // 200)

    def record(epoch: int, fit: LinearLogits) -> None:
        if epoch % every == 0 or epoch == config.epochs:
            curve.append(
                {
                    "epoch": epoch,
                    "train_loss": log_loss(sigmoid(fit.logits(standard)), labels),
                    "held_out_loss": log_loss(sigmoid(fit.logits(held_standard)), held_labels),
                }
            )

    fitted = logistic_descent(
        standard,
        labels,
        epochs=config.epochs,
        learning_rate=config.learning_rate,
        l2=config.l2,
        with_bias=with_bias,
        after_step=record,
    )
    weights, bias = fitted.weights, fitted.bias
    # Back to the features' own units: w . (x - c) / s + b = (w / s) . x + (b - w . c / s).
    raw = weights / scale
    return Fit(weights=raw, bias=float(bias - raw @ centre), curve=curve[-200:])


def evaluate(fit: Fit, rows: np.ndarray, labels: np.ndarray, *, source: str) -> dict[str, Any]:
    scores = rows @ fit.weights + fit.bias
    if source == "picks":
        # A pick read either way round is the same pick: score both orientations for AUC.
        auc_value = auc(np.concatenate([scores, -scores]), np.concatenate([labels, 1 - labels]))
    else:
        auc_value = auc(scores, labels)
    probabilities = sigmoid(scores)
    return {
        "n": len(labels),
        "accuracy": float(np.mean((probabilities > 0.5) == (labels == 1))) if len(labels) else None,
        "auc": auc_value,
        "log_loss": log_loss(probabilities, labels) if len(labels) else None,
    }


# --- Planning with the learned reward ----------------------------------------------------


def markov_move_reward(weights: np.ndarray, world: LettingsWorld) -> np.ndarray:
    """The learned reward each (state, move) earns by itself, shape (S, A): the move's count
    weight, plus its opening weight in the opening state, plus the per-move length weight.
    Bigram and order weights need the previous moves, which the state does not keep."""
    per_move = weights[_COUNT : _COUNT + N_ACTIONS] + weights[_ORDER + 3]
    opening = np.array(
        [describe_state(index)["stage"] == "opening" for index in range(world.n_states)]
    )
    reward = np.tile(per_move, (world.n_states, 1))
    reward[opening] += weights[_FIRST : _FIRST + N_ACTIONS]
    reward[world.terminal_mask] = 0.0
    return reward


def plan_with_reward(
    spec: Mapping[str, Any], weights: np.ndarray, config: RewardModelConfig
) -> dict[str, Any]:
    scenarios = scenarios_from_spec(spec)
    max_turns = max_turns_from_spec(spec)
    parent_strategy = spec.get("parent_strategy") or SCRIPTED
    tables, reports, scores, reach = {}, [], [], []
    worlds = []
    for scenario in scenarios:
        world = LettingsWorld(scenario.persona, max_turns=max_turns)
        shaped = world.rewards + config.shaping_weight * markov_move_reward(weights, world)
        planned = value_iteration(world.transitions, shaped, discount=1.0)
        parent = parent_policy(parent_strategy, scenario=scenario.slug, max_turns=max_turns)
        live = world.reachable_mask() & ~world.terminal_mask
        tables[scenario.slug] = table_from_scores(planned.q_values, live, parent)
        scores.append(planned.q_values)
        reach.append(occupancy(world, tables[scenario.slug]))
        worlds.append((scenario, world, parent))
    fallback = parent_policy(parent_strategy, scenario=None, max_turns=max_turns)
    default = default_table(scores, reach, fallback)
    for scenario, world, parent in worlds:
        reports.append(
            scenario_report(world, scenario, tables[scenario.slug], parent=parent, default=default)
        )
    return {
        "strategy": table_strategy(default, tables),
        "scenarios": reports,
        "summary": summarise(reports),
        "max_turns": max_turns,
    }


# --- The run -----------------------------------------------------------------------------


def _fit_report(
    data: Examples,
    fit: Fit,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    source: str,
    config: RewardModelConfig,
) -> dict[str, Any]:
    """The fitted weights, largest first, and how well they do on each side of the split."""
    order = np.argsort(-np.abs(fit.weights), kind="stable")

    def kept(values: Sequence[str], side: np.ndarray) -> list[str]:
        return [value for value, keep in zip(values, side, strict=True) if keep]

    return {
        "algorithm": ALGORITHM,
        "source": source,
        "weights": [
            {"feature": FEATURES[i][0], "weight": float(fit.weights[i]), "help": FEATURES[i][1]}
            for i in order
        ],
        "bias": fit.bias,
        "train": evaluate(fit, data.rows[train], data.labels[train], source=source),
        "held_out": evaluate(fit, data.rows[held_out], data.labels[held_out], source=source),
        "train_ids": kept(data.ids, train),
        "held_out_ids": kept(data.ids, held_out),
        "held_out_groups": sorted(set(kept(data.groups, held_out))),
        "learning_curve": fit.curve,
        "curve": {"x": "epoch", "y": ["train_loss", "held_out_loss"]},
        "knobs": asdict(config),
        "seed": config.seed,
    }


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Fit the reward on the spec's examples, held out by call; then, if asked, plan a move
    strategy with it on the simulator."""
    started = time.perf_counter()
    check_algorithm(spec, ALGORITHM)
    config: RewardModelConfig = config_from_knobs(
        RewardModelConfig, knobs_with_spec_seed(spec), algorithm=ALGORITHM
    )
    source = spec.get("source", "picks")
    data = examples_from_spec(source, spec.get("examples") or [])
    rng = np.random.default_rng(config.seed)
    train, held_out = split_by_group(data.groups, config.holdout_fraction, rng)
    progress(0, 2, stage="fitting", examples=len(data.labels))
    fit = fit_move_reward(
        data.rows[train],
        data.labels[train],
        config,
        with_bias=source == "outcomes",
        held_rows=data.rows[held_out],
        held_labels=data.labels[held_out],
    )
    result = _fit_report(data, fit, train, held_out, source=source, config=config)
    stage = "planning" if config.plan_strategy else "done"
    progress(1, 2, stage=stage, held_out_accuracy=result["held_out"]["accuracy"] or 0.0)
    if config.plan_strategy:
        result.update(plan_with_reward(spec, fit.weights, config))
    progress(2, 2, stage="done")
    result["seconds"] = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description="reward-model: a reward over move sequences")


if __name__ == "__main__":
    raise SystemExit(main())
