"""A Bradley-Terry leaderboard: versions ranked from pairwise wins, with bootstrap intervals.

Every duel pick between two versions and every per-turn comparison of an evaluation is one
game: (winner, loser). The model: P(i beats j) = sigmoid(s_i - s_j); strengths fitted by
maximum likelihood (a small L2 pull toward 0 keeps unbeaten versions finite and fixes the
scale's origin). Intervals come from refitting on games resampled with replacement.

Pure numpy; never imports Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainers.stats.intervals import bootstrap_draws, percentile_bounds
from trainers.stats.logistic import bradley_terry_strengths


@dataclass(frozen=True)
class Rating:
    player: str
    strength: float
    low: float
    high: float
    games: int
    wins: int


def bradley_terry(
    games: Sequence[tuple[str, str]],
    *,
    bootstrap: int = 200,
    confidence: float = 0.95,
    l2: float = 0.01,
    seed: int = 0,
) -> list[Rating]:
    """Ratings, strongest first. Each game is (winner, loser); ties are left out by callers."""
    players = sorted({name for game in games for name in game})
    if not players:
        return []
    index = {name: position for position, name in enumerate(players)}
    winners = np.array([index[w] for w, _ in games], dtype=np.int64)
    losers = np.array([index[loser] for _, loser in games], dtype=np.int64)
    strength = bradley_terry_strengths(winners, losers, len(players), l2=l2)
    samples = bootstrap_draws(
        np.column_stack([winners, losers]),
        lambda drawn: bradley_terry_strengths(drawn[:, 0], drawn[:, 1], len(players), l2=l2),
        seed=seed,
        samples=bootstrap,
    )
    low, high = percentile_bounds(samples, confidence=confidence)
    ratings = [
        Rating(
            player=name,
            strength=float(strength[i]),
            low=float(low[i]),
            high=float(high[i]),
            games=int(np.sum(winners == i) + np.sum(losers == i)),
            wins=int(np.sum(winners == i)),
        )
        for name, i in index.items()
    ]
    return sorted(ratings, key=lambda rating: rating.strength, reverse=True)
