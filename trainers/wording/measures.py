"""What a wording version's numbers mean: held-out figures with intervals, and whether it learned.

A reward model's held-out figure is only news when its interval lies above chance; an outcome AUC
over turn rows pools up to four correlated turns of a call and mostly tracks turn position and
reply length, so it is reported by call (a call's score is the mean over its opening turns),
within each turn position, and beside what a position-only and a length-only predictor score
on the same held-out rows. A policy learned something only when it moved from the base (KL
above zero) and its reward on held-out prompts rose.

Pure numpy: no model is loaded here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainers.stats.auc import auc
from trainers.stats.intervals import at_chance, bootstrap_interval

# Below this KL (nats per token) the policy is the base, whatever the optimizer logged.
KL_MOVED = 1e-4


def pair_measure(chosen: Sequence[float], rejected: Sequence[float], *, seed: int) -> dict:
    """Held-out pair accuracy (a tie is not agreement) with its interval over pairs."""
    agree = (np.asarray(chosen, dtype=float) > np.asarray(rejected, dtype=float)).astype(float)
    if len(agree) == 0:
        return {"pairs": 0, "accuracy": None, "accuracy_ci": None, "at_chance": True}
    bounds = bootstrap_interval(agree, lambda sample: float(sample.mean()), seed=seed)
    return {
        "pairs": len(agree),
        "accuracy": round(float(agree.mean()), 4),
        "accuracy_ci": bounds,
        "at_chance": at_chance(bounds),
    }


def _by_call(values: np.ndarray, calls: Sequence[str]) -> tuple[list[str], np.ndarray]:
    names = sorted(set(calls))
    index = {name: i for i, name in enumerate(names)}
    sums, counts = np.zeros(len(names)), np.zeros(len(names))
    for value, call in zip(values, calls, strict=True):
        sums[index[call]] += value
        counts[index[call]] += 1
    return names, sums / np.maximum(counts, 1)


def outcome_measure(
    scores: Sequence[float],
    won: Sequence[bool],
    calls: Sequence[str],
    *,
    positions: Sequence[int],
    reply_lengths: Sequence[int],
    seed: int,
) -> dict[str, Any]:
    """The held-out outcome figures of a won-probability over opening turns.

    auc_by_call      a call's score is the mean over its turns; interval over calls
    auc_within_position  the AUC among the turns at each position, weighted by their count
    position_only_auc    a call scored by how many opening turns it has
    length_only_auc      a call scored by its replies' mean length
    auc_rows         the pooled AUC over turn rows, for comparison only
    """
    values = np.asarray(scores, dtype=float)
    labels = np.asarray(won, dtype=bool)
    names, call_scores = _by_call(values, calls)
    _, call_won = _by_call(labels.astype(float), calls)
    counts = {name: 0 for name in names}
    for call in calls:
        counts[call] += 1
    turns = np.asarray([counts[name] for name in names], dtype=float)
    _, call_lengths = _by_call(np.asarray(reply_lengths, dtype=float), calls)
    won_calls = call_won > 0.5
    by_call = auc(call_scores, won_calls)
    paired = np.column_stack([call_scores, won_calls.astype(float)])
    bounds = (
        bootstrap_interval(paired, lambda sample: auc(sample[:, 0], sample[:, 1] > 0.5), seed=seed)
        if by_call is not None
        else None
    )
    within, weight = 0.0, 0
    position_array = np.asarray(positions)
    for position in sorted(set(position_array.tolist())):
        at = position_array == position
        value = auc(values[at], labels[at])
        if value is not None:
            within += value * int(at.sum())
            weight += int(at.sum())
    return {
        "calls": len(names),
        "rows": len(values),
        "auc_by_call": None if by_call is None else round(by_call, 4),
        "auc_by_call_ci": bounds,
        "at_chance": at_chance(bounds),
        "auc_within_position": round(within / weight, 4) if weight else None,
        "position_only_auc": _rounded(auc(turns, won_calls)),
        "length_only_auc": _rounded(auc(call_lengths, won_calls)),
        "auc_rows": _rounded(auc(values, labels)),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def positions_in_call(calls: Sequence[str]) -> list[int]:
    """Each row's turn position within its call (0 for the call's first row, in order)."""
    seen: dict[str, int] = {}
    positions = []
    for call in calls:
        positions.append(seen.get(call, 0))
        seen[call] = positions[-1] + 1
    return positions


def did_not_learn(
    *,
    reward_model: Mapping[str, Any] | None = None,
    policy: Mapping[str, Any] | None = None,
    preference: Mapping[str, Any] | None = None,
    seen: Mapping[str, Any] | None = None,
) -> list[str]:
    """Why a wording version learned nothing, in sentences a user can read; [] when it did.

    reward_model  the reward model's summary: held_out_accuracy(_ci) or held_out_auc(_ci)
    policy        kl, reward_before, reward_after (the rewards on held-out prompts) and
                  reward_gain_ci (their paired difference's interval), where measured
    preference    DPO's held_out_accuracy and its interval
    seen          the trained stage's data_seen: where its time budget cut it short, the
                  reasons end with how far it got, and what gives it more
    """
    reasons = _reasons(reward_model=reward_model, policy=policy, preference=preference)
    cut = budget_cut(seen)
    return [*reasons, cut] if reasons and cut else reasons


def budget_cut(seen: Mapping[str, Any] | None) -> str | None:
    """The sentence for a stage its time budget stopped early, or None. Measured on two
    2-core CPUs with the same 600 s policy budget: 17-18 steps on one with bf16 units, 5 on one
    with AVX2 alone (no bf16), where the version came out worse than its base."""
    if not seen or not seen.get("stopped_by_budget"):
        return None
    seconds = seen.get("budget_seconds")
    budget = f" ({seconds:.0f} s)" if isinstance(seconds, int | float) else ""
    return (
        f"Its time budget{budget} stopped it after {seen.get('steps')} of "
        f"{seen.get('planned_steps')} planned steps on this machine: a longer time budget "
        "(time_budget_s) or a GPU lets it take more."
    )


def _reasons(
    *,
    reward_model: Mapping[str, Any] | None,
    policy: Mapping[str, Any] | None,
    preference: Mapping[str, Any] | None,
) -> list[str]:
    reasons = []
    for label, block in (("The reward model", reward_model), ("DPO", preference)):
        if block is None:
            continue
        if block.get("held_out_auc") is not None:
            figure, bounds, name = block["held_out_auc"], block.get("held_out_auc_ci"), "AUC"
        else:
            figure, bounds = block.get("held_out_accuracy"), block.get("held_out_accuracy_ci")
            name = "pair accuracy"
        if figure is None:
            reasons.append(f"{label} has no held-out figure: nothing was held out to measure it.")
        elif at_chance(bounds):
            shown = f"{figure:.3f}" + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")
            reasons.append(f"{label}'s held-out {name} is at chance ({shown}).")
    if policy is not None:
        kl = policy.get("kl")
        before, after = policy.get("reward_before"), policy.get("reward_after")
        if kl is None or kl < KL_MOVED:
            reasons.append("The policy did not move from the base (KL to the base is 0).")
        if before is None or after is None:
            reasons.append("The policy's reward on held-out prompts was not measured.")
        elif after <= before:
            reasons.append(
                f"The policy's reward on held-out prompts did not rise ({before:.3f} → "
                f"{after:.3f})."
            )
        elif (gain := policy.get("reward_gain_ci")) is not None and gain[0] <= 0:
            # Paired over the same prompts: a rise the interval does not clear is no rise.
            reasons.append(
                f"The policy's reward on held-out prompts rose ({before:.3f} → {after:.3f}) "
                f"but not beyond its interval (gain [{gain[0]:+.3f}, {gain[1]:+.3f}])."
            )
    return reasons
