"""Intervals and chance: the bootstrap, the stratified bootstrap, Wilson's, and verdicts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from trainers.stats.intervals import (
    at_chance,
    bootstrap_interval,
    percentile_interval,
    resampled_indices,
    stratified_bootstrap_means,
    verdict,
    wilson_interval,
)


def test_bootstrap_interval_holds_the_mean_and_narrows_with_more_rows():
    rng = np.random.default_rng(0)
    few, many = rng.random(20), rng.random(2000)
    narrow = bootstrap_interval(many, lambda sample: float(sample.mean()), seed=0)
    wide = bootstrap_interval(few, lambda sample: float(sample.mean()), seed=0)
    assert narrow[0] < many.mean() < narrow[1]
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    # The normal approximation's half-width, 1.96 standard errors, within a tenth.
    half = 1.96 * many.std() / np.sqrt(len(many))
    assert (narrow[1] - narrow[0]) / 2 == pytest.approx(half, rel=0.1)


def test_bootstrap_interval_is_seeded_and_skips_undefined_resamples():
    rows = np.array([0.0, 1.0, 1.0])
    assert bootstrap_interval(rows, np.mean, seed=4) == bootstrap_interval(rows, np.mean, seed=4)
    only_none = bootstrap_interval(rows, lambda sample: None, seed=0)
    assert only_none is None
    assert bootstrap_interval(np.array([1.0]), np.mean, seed=0) is None


def test_percentile_interval_reads_the_tails_and_rounds():
    draws = np.arange(1001) / 1000.0
    assert percentile_interval(draws) == [0.025, 0.975]
    assert percentile_interval(draws, confidence=0.5) == [0.25, 0.75]


def test_resampled_indices_stay_inside_their_group():
    picks = resampled_indices([3, 5], 400, np.random.default_rng(0))
    assert picks.shape == (400, 8)
    assert set(np.unique(picks[:, :3])) == {0, 1, 2}
    assert set(np.unique(picks[:, 3:])) == {3, 4, 5, 6, 7}


def test_stratified_means_keep_each_groups_share():
    # Group one is all 0, group two all 1: every resample keeps three of each, so the mean is
    # exactly a half; a bootstrap ignoring the groups would spread around it.
    values = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    (means,) = stratified_bootstrap_means(
        [values], [3, 3], samples=500, rng=np.random.default_rng(1)
    )
    assert np.all(means == 0.5)


def test_wilson_matches_scipy():
    for won, total in [(0, 10), (3, 10), (10, 10), (47, 120)]:
        expected = binomtest(won, total).proportion_ci(method="wilson")
        low, high = wilson_interval(won, total)
        assert low == pytest.approx(expected.low, abs=1e-3)
        assert high == pytest.approx(expected.high, abs=1e-3)
    assert wilson_interval(0, 0) is None


def test_at_chance_below_and_across_a_half_but_not_above():
    assert at_chance(None)
    assert at_chance([0.45, 0.7])
    assert at_chance([0.5, 0.7])
    assert at_chance([0.2, 0.4])  # wholly below chance: it learned the wrong way round
    assert not at_chance([0.51, 0.7])
    assert not at_chance([0.01, 0.2], chance=0.0)


def test_verdict_says_which_side_of_chance():
    assert verdict(0.55, 0.7, chance=0.5) == "won"
    assert verdict(0.2, 0.45, chance=0.5) == "lost"
    assert verdict(0.45, 0.55, chance=0.5) == "even"
    assert verdict(-0.1, 0.2, chance=0.0) == "even"
