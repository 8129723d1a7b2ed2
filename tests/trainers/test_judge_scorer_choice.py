"""The rule every choice among a judge's scorers uses (trainers.judge.scorer_choice): the
preferred reader (the base) unless another beats it beyond the folds' spread."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.judge.learned import BASE, MIXED, WORDS, fit_total, fit_won
from trainers.judge.scorer_choice import choose_scorer, shortfall, within_spread

PREFERENCE = [BASE, MIXED, WORDS]


def _higher_mean(per_fold: dict[str, list[float]]) -> str:
    """The rule before: whichever mean over the folds is higher."""
    return max(per_fold, key=lambda kind: np.mean(per_fold[kind]))


def test_a_difference_of_noise_keeps_the_base_where_the_higher_mean_kept_the_words():
    # The real hh-rlhf fit's shape: the words 0.611 out of fold, the base 0.606, fold to fold
    # each moves by a few points.
    per_fold = {
        WORDS: [0.64, 0.58, 0.63, 0.59, 0.615],
        BASE: [0.60, 0.62, 0.57, 0.63, 0.61],
    }
    assert np.mean(per_fold[WORDS]) > np.mean(per_fold[BASE])
    assert _higher_mean(per_fold) == WORDS
    choice = choose_scorer(per_fold, PREFERENCE)
    assert choice.kind == BASE
    assert choice.best == WORDS
    figures = choice.described()["against_best"][BASE]
    assert 0 < figures["shortfall"] <= figures["standard_error"]


def test_words_that_beat_the_base_beyond_the_spread_are_kept():
    per_fold = {
        WORDS: [0.70, 0.72, 0.69, 0.71, 0.70],
        MIXED: [0.66, 0.69, 0.66, 0.67, 0.66],
        BASE: [0.60, 0.61, 0.62, 0.59, 0.60],
    }
    choice = choose_scorer(per_fold, PREFERENCE)
    assert choice.kind == WORDS
    against = choice.described()["against_best"]
    for kind in (BASE, MIXED):
        assert against[kind]["shortfall"] > against[kind]["standard_error"]


def test_the_first_preferred_within_the_spread_of_the_best_is_kept():
    # The words are best, the mix within noise of them, the base well below: the mix (it still
    # reads with the base) is kept, not the base.
    per_fold = {
        WORDS: [0.70, 0.72, 0.69, 0.71, 0.70],
        MIXED: [0.71, 0.70, 0.68, 0.72, 0.69],
        BASE: [0.60, 0.61, 0.62, 0.59, 0.60],
    }
    assert choose_scorer(per_fold, PREFERENCE).kind == MIXED


def test_the_spread_is_of_the_paired_difference_not_of_each_scorer():
    # Folds differ a lot from each other, but the words beat the base on every one by the
    # same margin: that is beyond the spread of the difference, whatever each one's spread.
    base = [0.50, 0.70, 0.55, 0.65, 0.60]
    per_fold = {BASE: base, WORDS: [score + 0.02 for score in base]}
    assert choose_scorer(per_fold, PREFERENCE).kind == WORDS


def test_folds_a_scorer_could_not_score_are_left_out_of_its_difference():
    per_fold = {BASE: [0.6, None, 0.62, 0.61, 0.6], WORDS: [0.61, 0.9, 0.6, 0.62, 0.61]}
    difference, error = shortfall(per_fold[WORDS], per_fold[BASE])
    assert difference == pytest.approx(0.0025)
    assert choose_scorer(per_fold, PREFERENCE).kind == BASE


def test_without_a_spread_only_a_tie_keeps_the_preferred_and_nothing_scored_is_no_choice():
    assert within_spread(0.0, None)
    assert not within_spread(0.01, None)
    assert choose_scorer({BASE: [0.6], WORDS: [0.61]}, PREFERENCE).kind == WORDS
    assert choose_scorer({BASE: [0.6], WORDS: [0.6]}, PREFERENCE).kind == BASE
    assert choose_scorer({BASE: [None], WORDS: [None]}, PREFERENCE).kind is None
    # Not allowed, not kept, however well it scores.
    assert choose_scorer({BASE: [0.9, 0.9], WORDS: [0.6, 0.6]}, [MIXED, WORDS]).kind == WORDS


@pytest.mark.parametrize("noise", [0.3, 3.0])
def test_the_heads_fits_choose_by_the_rule_and_report_its_figures(noise):
    """fit_total and fit_won keep what the rule keeps from their own per-fold scores."""
    rng = np.random.default_rng(5)
    count = 400
    chosen, rejected = rng.normal(size=(count, 8)), rng.normal(size=(count, 8))
    chosen[:, 0] += 0.4
    words = chosen[:, 0] - rejected[:, 0] + rng.normal(scale=noise, size=count)
    groups = [f"g{i}" for i in range(count)]
    head = fit_total(
        chosen,
        rejected,
        groups,
        lambda _train, held: words[held],
        keep_words=False,
        grid=(0.1, 1.0),
        seed=0,
    )
    per_fold = head.chosen_by["per_fold_accuracy"]
    assert set(per_fold) == {BASE, MIXED, WORDS}
    assert head.chosen_by["rule"].startswith("one standard error")
    assert head.kind == choose_scorer(per_fold, PREFERENCE).kind

    calls = np.repeat(np.arange(120), 3)
    won = calls % 2 == 0
    features = rng.normal(size=(len(calls), 6))
    features[:, 1] += np.where(won, 0.3, -0.3)
    turn_words = np.where(won, 0.3, -0.3) + rng.normal(scale=noise, size=len(calls))
    head = fit_won(
        features,
        won,
        [f"c{c}" for c in calls],
        lambda _train, held: turn_words[held],
        grid=(0.1, 1.0),
        seed=0,
    )
    per_fold = head.chosen_by["per_fold_auc_by_call"]
    assert head.kind == choose_scorer(per_fold, PREFERENCE).kind
    assert head.chosen_by["against_best"][head.kind]["shortfall"] <= max(
        head.chosen_by["against_best"][head.kind]["standard_error"] or 0.0, 0.0
    )
