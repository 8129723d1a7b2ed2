"""The numbers of an evaluation and of the lead-to-order lens, from plain values.

Pure Python + numpy (no Django), so the services, the selectors and the tests share one
definition of each figure:

- the win rate: per held-out moment, the candidate's judge total against the baseline's on
  the same moment (a win 1, a tie ½, a loss 0), averaged over every moment both answered;
- its confidence interval: a bootstrap over *calls* (the four moments of one call are not
  independent, so a call is resampled whole), percentile interval, seeded;
- the lens's bands: calls ranked by their opening judge score and cut into equal-count
  bands (quantiles), each with its won rate and a Wilson interval.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
# Equal up to float noise is a tie, not a win. The rubric's totals are rounded to 4 places, so
# its ties are exact; a fitted judge's totals are a sigmoid that can sit near 1 for every reply
# and differ by 1e-8 (in the demo, a tolerance of 1e-6 tied 131 of 160 moments and the
# checkpoint read the ties as the verdict).
TIE_TOLERANCE = 1e-12


def pairwise_outcome(candidate: float, baseline: float) -> float:
    """1 when the candidate scored higher on the same moment, 0 when lower, ½ on a tie."""
    if abs(candidate - baseline) <= TIE_TOLERANCE:
        return 0.5
    return 1.0 if candidate > baseline else 0.0


def win_rate_with_interval(
    outcomes_by_call: Sequence[Sequence[float]],
    *,
    seed: int,
    samples: int = BOOTSTRAP_SAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float | None, float | None, float | None]:
    """(win rate, low, high): the mean outcome over every moment, and a percentile bootstrap
    interval from resampling calls with replacement. Nones when nothing was compared."""
    calls = [list(outcomes) for outcomes in outcomes_by_call if outcomes]
    if not calls:
        return None, None, None
    if len(calls) < 2:
        # Resampling one call gives that call every time: a zero-width "interval" that
        # would turn one call's moments into a verdict.
        return round(sum(calls[0]) / len(calls[0]), 4), None, None
    wins = np.array([sum(outcomes) for outcomes in calls], dtype=np.float64)
    moments = np.array([len(outcomes) for outcomes in calls], dtype=np.float64)
    rate = float(wins.sum() / moments.sum())
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(calls), size=(samples, len(calls)))
    resampled = wins[picks].sum(axis=1) / moments[picks].sum(axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return round(rate, 4), round(float(low), 4), round(float(high), 4)


INCOMPLETE = "incomplete"
"""The verdict when the two versions were compared at fewer than half of the moments (one
errored or was released mid-way): a win rate over the rest is no verdict on the versions."""


def comparison_incomplete(compared: int, moments: int) -> bool:
    return moments > 0 and 2 * compared < moments


def verdict_of(low: float | None, high: float | None) -> str:
    """ "won" when the whole interval is above a half, "lost" when below, else "even"."""
    if low is None or high is None:
        return ""
    if low > 0.5:
        return "won"
    if high < 0.5:
        return "lost"
    return "even"


def mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def wilson_interval(won: int, total: int, *, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a won rate: sensible at small counts and near 0 or 1."""
    if total <= 0:
        return None
    rate = won / total
    denominator = 1 + z * z / total
    centre = (rate + z * z / (2 * total)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def band_edges(scores: Sequence[float], bands: int) -> list[float]:
    """The inner edges that cut sorted scores into `bands` bands of (nearly) equal count.
    Equal edges are merged, so tied scores never straddle two bands."""
    ordered = sorted(scores)
    edges: list[float] = []
    for cut in range(1, bands):
        edge = ordered[(cut * len(ordered)) // bands] if ordered else 0.0
        if ordered and edge > ordered[0] and (not edges or edge > edges[-1]):
            edges.append(edge)
    return edges


def band_of(edges: Sequence[float], score: float) -> int:
    """The band index (0 = lowest) a score falls in: a band holds its lower edge."""
    return bisect_right(list(edges), score)


def won_rate_by_score_band(
    calls: Sequence[tuple[float, bool]], *, bands: int
) -> tuple[list[float], list[dict[str, float | int | None]]]:
    """(inner edges, one row per band): the calls' score range, count, won count, won rate
    and its Wilson interval, lowest band first."""
    if not calls:
        return [], []
    scores = [score for score, _won in calls]
    edges = band_edges(scores, bands)
    rows: list[dict[str, float | int | None]] = []
    members: list[list[tuple[float, bool]]] = [[] for _ in range(len(edges) + 1)]
    for score, won in calls:
        members[band_of(edges, score)].append((score, won))
    for index, band in enumerate(members):
        won = sum(1 for _score, call_won in band if call_won)
        interval = wilson_interval(won, len(band))
        rows.append(
            {
                "band": index,
                "low": round(edges[index - 1] if index else min(scores), 4),
                "high": round(edges[index] if index < len(edges) else max(scores), 4),
                "min_score": round(min(score for score, _won in band), 4) if band else None,
                "max_score": round(max(score for score, _won in band), 4) if band else None,
                "calls": len(band),
                "won": won,
                "won_rate": round(won / len(band), 4) if band else None,
                "ci_low": interval[0] if interval else None,
                "ci_high": interval[1] if interval else None,
            }
        )
    return edges, rows
