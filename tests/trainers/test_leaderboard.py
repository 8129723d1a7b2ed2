"""The Bradley-Terry leaderboard."""

from __future__ import annotations

import numpy as np

from trainers.stats.leaderboard import bradley_terry


def test_it_ranks_the_stronger_version_first_with_an_interval():
    rng = np.random.default_rng(1)
    truth = {"v1": 0.0, "v2": 1.0, "v3": 2.0}
    games = []
    for _ in range(600):
        a, b = rng.choice(list(truth), size=2, replace=False)
        p_a = 1 / (1 + np.exp(-(truth[a] - truth[b])))
        games.append((a, b) if rng.random() < p_a else (b, a))
    ratings = bradley_terry(games, bootstrap=100)
    assert [r.player for r in ratings] == ["v3", "v2", "v1"]
    gaps = {r.player: r.strength for r in ratings}
    assert abs((gaps["v3"] - gaps["v1"]) - 2.0) < 0.4
    for rating in ratings:
        assert rating.low <= rating.strength <= rating.high
    assert sum(r.games for r in ratings) == 2 * len(games)


def test_it_keeps_an_unbeaten_version_finite_and_is_deterministic():
    games = [("v2", "v1")] * 5
    first = bradley_terry(games, bootstrap=20, seed=3)
    assert first[0].player == "v2"
    assert np.isfinite(first[0].strength)
    assert first == bradley_terry(games, bootstrap=20, seed=3)
    assert bradley_terry([]) == []
