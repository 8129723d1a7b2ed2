"""An evaluation's summary: every figure computed once from its stored answers and kept (the
win rate with its bootstrap interval, mean reward and radar per version, how often each beat
the yardstick, what each side's replies look like, each call's means), the regressions beyond
the judge's noise as the pages, the API and the admin read them, and what the radar chart
draws.

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from arena.judge.world_dimensions import world_dimensions
from arena.models import Judgement
from evaluation import scoring
from evaluation.models import Evaluation, EvaluationAnswer, EvaluationCallSet, HeldOutMoment
from evaluation.reply_habits import evaluation_reply_habits
from policies.models import PolicyVersion
from trainers.judge.rubric import Dimension

SIDES = ("candidate", "baseline")

# (side, held-out moment) -> (judge total, judge scores), for "candidate", "baseline" and
# "yardstick" alike.
Scored = dict[tuple[str, int], tuple[float, dict[str, float]]]


def _radar(
    score_sets: list[dict[str, float]], rubric: tuple[Dimension, ...]
) -> dict[str, float | None]:
    """The mean score of each dimension of the world's rubric (its own, not the seven)."""
    return {
        dimension.name: scoring.mean(
            [float(scores[dimension.name]) for scores in score_sets if dimension.name in scores]
        )
        for dimension in rubric
    }


def dimension_rows(rubric: tuple[Dimension, ...]) -> list[dict[str, str]]:
    return [{"name": dimension.name, "label": dimension.label} for dimension in rubric]


def _held_moments(call_set: EvaluationCallSet) -> list[HeldOutMoment]:
    return list(
        HeldOutMoment.objects.filter(held_out_call__call_set=call_set)
        .select_related("held_out_call__call", "held_out_call__scenario")
        .order_by("held_out_call__position", "number")
    )


def _answer_scores(evaluation: Evaluation) -> tuple[Scored, dict[str, int]]:
    """The versions' judged answers, and per side how many answers have no total."""
    scored: Scored = {}
    errors: dict[str, int] = defaultdict(int)
    for answer in EvaluationAnswer.objects.filter(evaluation=evaluation).select_related(
        "judgement"
    ):
        if answer.total is None:
            errors[answer.side] += 1
            continue
        scored[(answer.side, answer.held_out_moment_id)] = (
            answer.total,
            dict(answer.judgement.scores) if answer.judgement_id else {},
        )
    return scored, errors


def _yardstick_scores(held: list[HeldOutMoment], judge_model: str) -> Scored:
    """The yardstick's newest usable verdict of the evaluation's judge at each moment."""
    yardsticks = {
        judgement.reply_id: judgement
        for judgement in Judgement.objects.filter(
            reply_id__in=[h.yardstick_id for h in held],
            judge_model=judge_model,
            error="",
        ).order_by("created_at", "id")
    }
    scored: Scored = {}
    for held_moment in held:
        judgement = yardsticks.get(held_moment.yardstick_id)
        if judgement is not None and judgement.total is not None:
            scored[("yardstick", held_moment.pk)] = (judgement.total, dict(judgement.scores))
    return scored


def _moments_by_call(held: list[HeldOutMoment]) -> dict[int, list[HeldOutMoment]]:
    by_call: dict[int, list[HeldOutMoment]] = defaultdict(list)
    for held_moment in held:
        by_call[held_moment.held_out_call_id].append(held_moment)
    return by_call


def _call_figures(
    moments: list[HeldOutMoment], scored: Scored
) -> tuple[list[float], list[float], dict[str, Any]]:
    """One held-out call: the pairwise outcome and the paired difference (the candidate's total
    less the baseline's) at each moment both versions were judged, and its row of means (the
    delta is the candidate's mean less the baseline's)."""
    held_call = moments[0].held_out_call
    outcomes: list[float] = []
    differences: list[float] = []
    means: dict[str, list[float]] = defaultdict(list)
    for held_moment in moments:
        pair = [scored.get((side, held_moment.pk)) for side in SIDES]
        if all(pair):
            outcomes.append(scoring.pairwise_outcome(pair[0][0], pair[1][0]))
            differences.append(pair[0][0] - pair[1][0])
            means["candidate"].append(pair[0][0])
            means["baseline"].append(pair[1][0])
        yard = scored.get(("yardstick", held_moment.pk))
        if yard:
            means["yardstick"].append(yard[0])
    candidate_mean = scoring.mean(means["candidate"])
    baseline_mean = scoring.mean(means["baseline"])
    delta = (
        round(candidate_mean - baseline_mean, 4)
        if candidate_mean is not None and baseline_mean is not None
        else None
    )
    row = {
        "position": held_call.position,
        "label": held_call.label,
        "outcome": held_call.outcome,
        "turns": len(outcomes),
        "candidate": candidate_mean,
        "baseline": baseline_mean,
        "yardstick": scoring.mean(means["yardstick"]),
        "delta": delta,
        "wins": sum(1 for outcome in outcomes if outcome == 1.0),
        "losses": sum(1 for outcome in outcomes if outcome == 0.0),
    }
    return outcomes, differences, row


def _win_figures(outcomes_by_call: list[list[float]], *, seed: int) -> dict[str, Any]:
    """The head-to-head: wins, ties and losses over every compared moment, and the win rate
    with its bootstrap interval over calls and the verdict it gives."""
    outcomes = [outcome for call_outcomes in outcomes_by_call for outcome in call_outcomes]
    wins = sum(1 for outcome in outcomes if outcome == 1.0)
    ties = sum(1 for outcome in outcomes if outcome == 0.5)
    losses = sum(1 for outcome in outcomes if outcome == 0.0)
    win_rate, low, high = scoring.win_rate_with_interval(outcomes_by_call, seed=seed)
    return {
        "compared": wins + ties + losses,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "win_rate": win_rate,
        "ci": [low, high] if low is not None else None,
        "ci_level": scoring.CONFIDENCE,
        "bootstrap_samples": scoring.BOOTSTRAP_SAMPLES,
        "verdict": scoring.verdict_of(low, high),
    }


def _yardstick_beaten(side: str, held: list[HeldOutMoment], scored: Scored) -> tuple[int, int]:
    """At how many moments the side scored above the yardstick, of how many both were judged."""
    beaten = compared = 0
    for held_moment in held:
        mine, yard = (
            scored.get((side, held_moment.pk)),
            scored.get(("yardstick", held_moment.pk)),
        )
        if mine and yard:
            compared += 1
            beaten += mine[0] > yard[0] + scoring.TIE_TOLERANCE
    return beaten, compared


def _side_figures(
    side: str,
    version: PolicyVersion | None,
    *,
    held: list[HeldOutMoment],
    scored: Scored,
    errors: dict[str, int],
    per_call: list[dict[str, Any]],
    yardstick_label: str,
    rubric: tuple[Dimension, ...],
) -> dict[str, Any]:
    """One side's figures: a version's (with how often it beat the yardstick), or with no
    version the yardstick's own; its radar on the world's rubric."""
    totals = [scored[(side, h.pk)][0] for h in held if (side, h.pk) in scored]
    call_means = [row[side] for row in per_call if row.get(side) is not None]
    figures = {
        "mean_reward": scoring.mean(totals),
        # A call's mean over its judged turns, averaged over calls: the lens's scale.
        "mean_call_score": scoring.mean(call_means),
        "radar": _radar([scored[(side, h.pk)][1] for h in held if (side, h.pk) in scored], rubric),
        "answered": len(totals),
    }
    if version is not None:
        beaten, compared = _yardstick_beaten(side, held, scored)
        figures.update(
            {
                "version": version.number,
                "label": version.label,
                "beat_yardstick": round(beaten / compared, 4) if compared else None,
                "beat_yardstick_count": beaten,
                "compared_with_yardstick": compared,
                "errors": errors.get(side, 0),
            }
        )
    else:
        figures["label"] = yardstick_label
    return figures


def _regressions(
    per_call: list[dict[str, Any]], differences_by_call: list[list[float]], *, turns_per_call: int
) -> tuple[list[int], dict[str, Any]]:
    """The positions of the calls where the candidate scored lower than the baseline by more
    than the judge's noise (evaluation.scoring.call_difference_noise), worst first, and that
    noise: each row gets its own ("noise", by its number of judged turns) and whether it is a
    "regression"; the noise dict says it for a call of `turns_per_call` turns ("noise")."""
    noise = scoring.call_difference_noise(differences_by_call)
    noise["turns"] = turns_per_call
    noise["noise"] = scoring.noise_of_call(noise, turns_per_call)
    for row in per_call:
        row["noise"] = scoring.noise_of_call(noise, row["turns"])
        row["regression"] = scoring.beyond_noise_below(row["delta"], row["noise"])
    regressions = sorted(
        (row for row in per_call if row["regression"]),
        key=lambda row: (row["delta"], row["position"]),
    )
    return [row["position"] for row in regressions], noise


def _per_call(
    held: list[HeldOutMoment], scored: Scored
) -> tuple[list[list[float]], list[list[float]], list[dict[str, Any]]]:
    """Each held-out call's outcomes, paired differences and row, in the call set's order."""
    outcomes_by_call: list[list[float]] = []
    differences_by_call: list[list[float]] = []
    per_call: list[dict[str, Any]] = []
    for moments in _moments_by_call(held).values():
        outcomes, differences, row = _call_figures(moments, scored)
        outcomes_by_call.append(outcomes)
        differences_by_call.append(differences)
        per_call.append(row)
    return outcomes_by_call, differences_by_call, per_call


def evaluation_summary_compute(evaluation: Evaluation) -> dict[str, Any]:
    """Every figure of an evaluation from its stored answers, as plain values: the win rate
    with its bootstrap interval, mean reward (the judge's total) and radar per version, how
    often each beat the yardstick, each call's means and the regressions (calls where the
    candidate scored lower than the baseline by more than the judge's noise), worst first, with
    that noise ("regression_noise")."""
    call_set = evaluation.call_set
    held = _held_moments(call_set)
    scored, errors = _answer_scores(evaluation)
    scored.update(_yardstick_scores(held, evaluation.judge_model))
    outcomes_by_call, differences_by_call, per_call = _per_call(held, scored)
    regressions, noise = _regressions(
        per_call, differences_by_call, turns_per_call=call_set.turns_per_call
    )
    rubric = world_dimensions(evaluation.world)
    side_inputs = {
        "rubric": rubric,
        "held": held,
        "scored": scored,
        "errors": errors,
        "per_call": per_call,
        "yardstick_label": call_set.yardstick_label,
    }
    win_figures = _win_figures(outcomes_by_call, seed=evaluation.seed)
    if scoring.comparison_incomplete(win_figures["compared"], len(held)):
        win_figures["verdict"] = scoring.INCOMPLETE
    sides = {side: _side_figures(side, getattr(evaluation, side), **side_inputs) for side in SIDES}
    # Beside the judge's totals, what the replies look like (the guard's caps, length,
    # repetition): a win that is only one of those shows (evaluation.reply_habits).
    for side, habits in evaluation_reply_habits(evaluation).items():
        sides[side]["replies"] = habits
    if evaluation.against_base:
        sides["baseline"]["label"] = evaluation.baseline_label
        sides["baseline"]["untrained_base"] = evaluation.candidate.base_model
    return {
        "kind": call_set.kind,
        "judge_model": evaluation.judge_model,
        "seed": evaluation.seed,
        "calls": len(per_call),
        "moments": len(held),
        **win_figures,
        "candidate": sides["candidate"],
        "baseline": sides["baseline"],
        "yardstick": _side_figures("yardstick", None, **side_inputs),
        "dimensions": dimension_rows(rubric),
        "per_call": per_call,
        "regressions": regressions,
        "regression_noise": noise,
    }


def evaluation_regressions(evaluation: Evaluation) -> dict[str, Any]:
    """A finished evaluation's regressions as every page, the API and the admin read them:
    "positions" (worst first), "noise" (the judge's noise they are beyond, see
    evaluation.scoring.call_difference_noise) and "per_call" (each row with its own "noise"
    and whether it is a "regression"). A summary kept before the noise rule listed every call
    that scored lower at all: its regressions are worked out again from the stored answers."""
    summary = evaluation.summary or {}
    if "regression_noise" in summary or not summary.get("per_call"):
        return {
            "positions": summary.get("regressions", []),
            "noise": summary.get("regression_noise"),
            "per_call": summary.get("per_call", []),
        }
    scored, _errors = _answer_scores(evaluation)
    _outcomes, differences_by_call, per_call = _per_call(_held_moments(evaluation.call_set), scored)
    positions, noise = _regressions(
        per_call, differences_by_call, turns_per_call=evaluation.call_set.turns_per_call
    )
    return {"positions": positions, "noise": noise, "per_call": per_call}


def regressions_rows(
    evaluation: Evaluation, regressions: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The regressions of a finished evaluation as table rows, worst first (from
    evaluation_regressions, worked out here unless given)."""
    regressions = regressions or evaluation_regressions(evaluation)
    rows = {row["position"]: row for row in regressions["per_call"]}
    return [rows[position] for position in regressions["positions"] if position in rows]


def regression_noise_words(noise: dict[str, Any] | None) -> str:
    """The judge's noise a regression is beyond, in words for the pages: "±0.0123 on a call of
    4 turns (1.96 × 0.0126, the spread of the turn-by-turn difference within a call, pooled
    over 40 calls, ÷ √4)"; "" when unmeasured."""
    if not noise:
        return ""
    if noise.get("noise") is None:
        return (
            "the judge's noise cannot be measured here: no call had two turns where both "
            "versions were judged, so no call is listed"
        )
    turns = noise["turns"]
    return (
        f"±{noise['noise']:.4f} on a call of {turns} turns ({noise['z']:.2f} × "
        f"{noise['spread']:.4f}, the spread of the turn-by-turn difference within a call, pooled "
        f"over {noise['calls']} calls, ÷ √{turns}; {noise['confidence'] * 100:.0f}% of a call's "
        "differences fall inside it by chance)"
    )


def evaluation_chart_data(evaluation: Evaluation) -> dict[str, Any]:
    """What the radar chart draws: mean judge score per dimension of each version and of
    the yardstick."""
    summary = evaluation.summary or {}
    # The dimensions the summary was computed on (its world's rubric then).
    rows = summary.get("dimensions") or dimension_rows(world_dimensions(evaluation.world))
    return {
        "dimensions": [row["label"] for row in rows],
        "series": [
            {
                "name": summary.get(side, {}).get("label", side),
                "values": [summary.get(side, {}).get("radar", {}).get(row["name"]) for row in rows],
            }
            for side in ("candidate", "baseline", "yardstick")
            if summary.get(side)
        ],
    }
