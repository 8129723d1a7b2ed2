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


@dataclass(frozen=True)
class Rating:
    player: str
    strength: float
    low: float
    high: float
    games: int
    wins: int


def _fit(winners: np.ndarray, losers: np.ndarray, players: int, *, l2: float) -> np.ndarray:
    """Newton's method on the penalised log-likelihood (concave: converges in a few steps)."""
    strength = np.zeros(players)
    for _ in range(100):
        margin = strength[winners] - strength[losers]
        p_win = 1.0 / (1.0 + np.exp(-margin))
        gradient = -l2 * strength
        np.add.at(gradient, winners, 1.0 - p_win)
        np.add.at(gradient, losers, -(1.0 - p_win))
        weight = p_win * (1.0 - p_win)
        hessian = -l2 * np.eye(players)
        np.add.at(hessian, (winners, winners), -weight)
        np.add.at(hessian, (losers, losers), -weight)
        np.add.at(hessian, (winners, losers), weight)
        np.add.at(hessian, (losers, winners), weight)
        step = np.linalg.solve(hessian, gradient)
        strength -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return strength - strength.mean()


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
    strength = _fit(winners, losers, len(players), l2=l2)
    rng = np.random.default_rng(seed)
    samples = np.empty((bootstrap, len(players)))
    for draw in range(bootstrap):
        chosen = rng.integers(0, len(games), size=len(games))
        samples[draw] = _fit(winners[chosen], losers[chosen], len(players), l2=l2)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail], axis=0)
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
