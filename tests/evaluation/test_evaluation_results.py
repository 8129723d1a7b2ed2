"""An evaluation's results: deterministic for the same seed, a bootstrap interval around the
win rate, mean reward and radar per version, how often each beat the yardstick, and the
regressions — exactly the calls where the candidate scored lower by more than the judge's noise."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from arena.models import Judgement, Reply
from evaluation.models import Evaluation, EvaluationAnswer, HeldOutMoment
from evaluation.scoring import pairwise_outcome
from trainers.judge.rubric import DIMENSIONS


def _strip_ids(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key != "lens_scored_now"}


def test_it_gives_the_same_results_for_the_same_seed(lettings, pushy, baseline, evaluate):
    first = evaluate(lettings, pushy, baseline, seed=7)
    second = evaluate(lettings, pushy, baseline, seed=7)
    assert first.state == second.state == Evaluation.State.DONE
    assert _strip_ids(first.summary) == _strip_ids(second.summary)
    # Another seed moves only the bootstrap: the replies and the win rate stay.
    third = evaluate(lettings, pushy, baseline, seed=8)
    assert third.summary["win_rate"] == first.summary["win_rate"]
    assert third.summary["per_call"] == first.summary["per_call"]


def test_it_brackets_the_win_rate_with_its_bootstrap_interval(lettings, pushy, baseline, evaluate):
    summary = evaluate(lettings, pushy, baseline).summary
    low, high = summary["ci"]
    assert low <= summary["win_rate"] <= high
    assert low < high  # the calls disagree, so the interval has a width
    assert summary["compared"] == summary["wins"] + summary["ties"] + summary["losses"]
    assert summary["win_rate"] == round(
        (summary["wins"] + 0.5 * summary["ties"]) / summary["compared"], 4
    )


def test_it_scores_the_same_versions_even(lettings, baseline, evaluate):
    from arena.models import World
    from policies.services import version_register

    twin = version_register(
        world=World.objects.get(slug="lettings"),
        name="twin",
        parent=baseline,
        move_strategy={"kind": "scripted"},
        learned_from={},
    )
    summary = evaluate(lettings, twin, baseline).summary
    assert summary["win_rate"] == 0.5
    assert summary["ties"] == summary["compared"]
    assert summary["ci"] == [0.5, 0.5]
    assert summary["verdict"] == "even"
    assert summary["regressions"] == []


def test_it_lists_as_regressions_exactly_the_calls_lower_beyond_the_judges_noise(
    lettings, pushy, baseline, evaluate
):
    evaluation = evaluate(lettings, pushy, baseline)
    differences: dict[int, dict[int, float]] = defaultdict(dict)
    totals: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for answer in EvaluationAnswer.objects.filter(evaluation=evaluation).select_related(
        "held_out_moment__held_out_call"
    ):
        position = answer.held_out_moment.held_out_call.position
        totals[(position, answer.held_out_moment_id)][answer.side] = answer.total
    for (position, moment), sides in totals.items():
        differences[position][moment] = sides["candidate"] - sides["baseline"]
    # The noise, worked out here from the answers: the per-turn difference's spread within
    # calls, pooled over the calls, times 1.96 over the square root of the call's turns.
    squares = degrees = 0.0
    for by_moment in differences.values():
        values = list(by_moment.values())
        squares += sum((value - sum(values) / len(values)) ** 2 for value in values)
        degrees += len(values) - 1
    spread = math.sqrt(squares / degrees)
    lower = {
        position
        for position, by_moment in differences.items()
        if sum(by_moment.values()) / len(by_moment)
        < -1.96 * spread / math.sqrt(len(by_moment)) - 1e-6
    }
    summary = evaluation.summary
    assert lower, "the pushy version should do worse somewhere"
    assert set(summary["regressions"]) == lower
    assert summary["regression_noise"]["spread"] == pytest.approx(spread, abs=1e-6)
    within = {p for p, by_moment in differences.items() if sum(by_moment.values()) < 0} - lower
    assert within, "some calls score lower only within the noise, and are not listed"
    deltas = {row["position"]: row["delta"] for row in summary["per_call"]}
    # Worst first.
    assert [deltas[p] for p in summary["regressions"]] == sorted(
        deltas[p] for p in summary["regressions"]
    )


def test_it_reports_mean_reward_radar_and_the_yardstick(lettings, pushy, baseline, evaluate):
    evaluation = evaluate(lettings, pushy, baseline)
    summary = evaluation.summary
    answers = EvaluationAnswer.objects.filter(evaluation=evaluation)
    for side in ("candidate", "baseline"):
        figures = summary[side]
        totals = list(answers.filter(side=side).values_list("total", flat=True))
        assert figures["answered"] == len(totals) == summary["moments"]
        assert figures["mean_reward"] == round(sum(totals) / len(totals), 4)
        assert set(figures["radar"]) == set(DIMENSIONS)
        assert all(0.0 <= value <= 1.0 for value in figures["radar"].values())
    assert summary["candidate"]["version"] == pushy.number
    assert summary["baseline"]["label"] == baseline.label
    # How often each beat the scripted agent of the reference call, turn by turn.
    held = HeldOutMoment.objects.filter(held_out_call__call_set=evaluation.call_set)
    yardstick = {
        judgement.reply_id: judgement.total
        for judgement in Judgement.objects.filter(reply_id__in=held.values("yardstick_id"))
    }
    beaten = sum(
        1
        for answer in answers.filter(side="candidate").select_related("held_out_moment")
        if answer.total > yardstick[answer.held_out_moment.yardstick_id] + 1e-6
    )
    assert summary["candidate"]["beat_yardstick_count"] == beaten
    assert summary["yardstick"]["label"] == "scripted agent"


def test_it_plays_the_scripted_customers_through_for_the_simulator_return(
    lettings, pushy, baseline, evaluate
):
    returns = evaluate(lettings, pushy, baseline).summary["returns"]
    # Offering a slot before anything else never books a viewing on the simulator.
    assert returns["candidate"]["won_share"] < returns["baseline"]["won_share"]
    assert returns["candidate"]["mean_return"] < returns["baseline"]["mean_return"]
    assert returns["baseline"]["calls"] == 40


def test_it_compares_the_two_versions_on_the_same_moments(lettings, pushy, baseline, evaluate):
    evaluation = evaluate(lettings, pushy, baseline)
    by_moment: dict[int, dict[str, EvaluationAnswer]] = defaultdict(dict)
    for answer in EvaluationAnswer.objects.filter(evaluation=evaluation).select_related("reply"):
        by_moment[answer.held_out_moment_id][answer.side] = answer
    outcomes = []
    for sides in by_moment.values():
        assert sides["candidate"].reply.moment_id == sides["baseline"].reply.moment_id
        assert sides["candidate"].reply.source == Reply.Source.POLICY
        assert sides["candidate"].reply.author.version_id == pushy.pk
        outcomes.append(pairwise_outcome(sides["candidate"].total, sides["baseline"].total))
    assert evaluation.summary["wins"] == outcomes.count(1.0)
    assert evaluation.summary["losses"] == outcomes.count(0.0)


def test_it_judges_the_yardstick_once_and_reuses_it(lettings, pushy, baseline, evaluate):
    evaluate(lettings, pushy, baseline)
    held = HeldOutMoment.objects.filter(held_out_call__call_set__world=lettings)
    yardstick_judgements = Judgement.objects.filter(reply_id__in=held.values("yardstick_id"))
    count = yardstick_judgements.count()
    assert count == held.count()
    evaluate(lettings, pushy, baseline, seed=3)
    assert yardstick_judgements.count() == count


def test_it_gives_the_policies_page_each_versions_last_verdict(lettings, pushy, baseline, evaluate):
    from evaluation.verdict_words import version_verdicts

    assert version_verdicts() == {}
    evaluation = evaluate(lettings, pushy, baseline)
    verdict = version_verdicts()[pushy.pk]
    assert verdict["evaluation"] == evaluation.pk
    # On scripted customers the verdict and "lost" are the simulator's (they were the judge's
    # win rate before the simulated duel); the judge's win rate stays in the words.
    duel = evaluation.summary["simulator"]
    assert verdict["verdict"] == duel["verdict"] == evaluation.verdict
    assert verdict["lost"] is (duel["won_share_difference"] < 0)
    assert f"against {baseline.label}: won share" in verdict["summary"]
    assert f"the judge's win rate {evaluation.win_rate:.2f}" in verdict["summary"]
    assert baseline.pk not in version_verdicts()


def test_a_fitted_judges_totals_near_one_still_decide():
    # Sigmoid totals of a fitted judge whose logits sit around 15-22: apart by 4e-8.
    assert pairwise_outcome(0.9999995633565452, 0.9999995195010276) == 1.0
    assert pairwise_outcome(0.9999995195010276, 0.9999995633565452) == 0.0
    # The rubric's rounded totals tie exactly, and float noise is no win.
    assert pairwise_outcome(0.7421, 0.7421) == 0.5
    assert pairwise_outcome(0.1 + 0.2, 0.3) == 0.5
