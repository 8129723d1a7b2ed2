"""Intervals around a measured figure, and what they say about chance: one definition each.

- `bootstrap_interval`: a statistic's percentile interval from resampling rows whole (a row
  being a pair, or a call when a call's turns are not independent);
- `stratified_bootstrap_means`: means over resamples drawn within each group (a scenario),
  so every resample keeps the mix the groups were designed with;
- `percentile_interval`: the interval read off any resampled draws;
- `wilson_interval`: a rate's interval from its counts alone;
- `at_chance` and `verdict`: whether an interval clears the chance level, and which side.

Pure numpy; never imports Django.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

BOOTSTRAP = 1000
"""Resamples of a held-out measure's bootstrap."""
CONFIDENCE = 0.95
CHANCE = 0.5
"""The chance level of an accuracy or an AUC: a coin agrees half the time."""
# Resampled indices held at once by a stratified bootstrap (about 16 MB of int64).
_BOOTSTRAP_CELLS = 2_000_000


def percentile_bounds(draws: Any, *, confidence: float = CONFIDENCE) -> np.ndarray:
    """The (low, high) percentiles of resampled draws that hold `confidence` between them,
    along the first axis (so a draw may be a vector: one bound per entry)."""
    tail = (1.0 - confidence) / 2 * 100
    return np.percentile(np.asarray(draws, dtype=float), [tail, 100 - tail], axis=0)


def percentile_interval(draws: Any, *, confidence: float = CONFIDENCE) -> list[float]:
    """[low, high] of scalar draws, rounded as stored, so a verdict read from the stored
    interval is the one computed here."""
    low, high = percentile_bounds(draws, confidence=confidence)
    return [round(float(low), 4), round(float(high), 4)]


def bootstrap_draws(
    rows: np.ndarray, statistic: Callable[[np.ndarray], Any], *, seed: int, samples: int
) -> list[Any]:
    """`statistic` of `samples` resamples of `rows`, each row drawn whole with replacement."""
    rng = np.random.default_rng(seed)
    return [statistic(rows[rng.integers(0, len(rows), len(rows))]) for _ in range(samples)]


def bootstrap_interval(
    rows: np.ndarray,
    statistic: Callable[[np.ndarray], float | None],
    *,
    seed: int,
    samples: int = BOOTSTRAP,
    confidence: float = CONFIDENCE,
) -> list[float] | None:
    """The percentile bootstrap interval of `statistic`, resampling rows whole; resamples where
    the statistic is undefined (None or NaN: one class drawn only) are left out. None under
    two rows (resampling one row gives it every time: a zero-width interval) or when no
    resample was defined."""
    if len(rows) < 2:
        return None
    draws = [
        value
        for value in bootstrap_draws(rows, statistic, seed=seed, samples=samples)
        if value is not None and not math.isnan(value)
    ]
    return percentile_interval(draws, confidence=confidence) if draws else None


def resampled_indices(counts: Sequence[int], size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` resamples of consecutive groups of rows (`counts` rows each), shape
    (size, sum(counts)): each group's block is resampled with replacement within itself."""
    picks = np.empty((size, int(sum(counts))), dtype=np.int64)
    offset = 0
    for count in counts:
        picks[:, offset : offset + count] = offset + rng.integers(0, count, size=(size, count))
        offset += count
    return picks


def stratified_bootstrap_means(
    arrays: Sequence[np.ndarray],
    counts: Sequence[int],
    *,
    samples: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """The mean of each array over `samples` resamples of its rows, grouped as `counts` says
    (see resampled_indices; the same resamples for every array). Done in chunks of
    resamples, so memory stays flat however many rows there are."""
    rows = int(sum(counts))
    chunk = max(1, _BOOTSTRAP_CELLS // rows)
    means = [np.empty(samples) for _ in arrays]
    for start in range(0, samples, chunk):
        size = min(chunk, samples - start)
        picks = resampled_indices(counts, size, rng)
        for values, mean in zip(arrays, means, strict=True):
            mean[start : start + size] = values[picks].mean(axis=1)
    return means


def wilson_interval(won: int, total: int, *, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a won rate: sensible at small counts and near 0 or 1."""
    if total <= 0:
        return None
    rate = won / total
    denominator = 1 + z * z / total
    centre = (rate + z * z / (2 * total)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def at_chance(bounds: Sequence[float] | None, *, chance: float = CHANCE) -> bool:
    """No better than chance: no interval to say otherwise, or one that reaches down to the
    chance level (or lies below it: a measure that disagrees with the truth is no yardstick
    either, and a model below chance did not learn)."""
    return bounds is None or bounds[0] <= chance


def verdict(low: float, high: float, *, chance: float) -> str:
    """ "won" when the whole interval lies above `chance`, "lost" when below it, else "even"."""
    if low > chance:
        return "won"
    if high < chance:
        return "lost"
    return "even"
