"""The numbers of an evaluation and of the lead-to-order lens, from plain values.

Pure Python + numpy (no Django), so the services, the selectors and the tests share one
definition of each figure:

- the win rate: per held-out moment, the candidate's judge total against the baseline's on
  the same moment (a win 1, a tie ½, a loss 0), averaged over every moment both answered;
- its confidence interval: a bootstrap over *calls* (the four moments of one call are not
  independent, so a call is resampled whole), percentile interval, seeded;
- a regression: a call whose mean paired difference lies beyond the judge's noise (see
  call_difference_noise);
- the lens's bands: calls ranked by their opening judge score and cut into equal-count
  bands (quantiles), each with its won rate and a Wilson interval, and drawn by their share
  of the world's calls (see band_positions).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from trainers.stats.intervals import (
    CHANCE,
    percentile_interval,
    resampled_indices,
    verdict,
    wilson_interval,
)

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
    # The calls are one group: each resample draws as many calls, whole, with replacement.
    picks = resampled_indices([len(calls)], samples, np.random.default_rng(seed))
    resampled = wins[picks].sum(axis=1) / moments[picks].sum(axis=1)
    low, high = percentile_interval(resampled, confidence=confidence)
    return round(rate, 4), low, high


INCOMPLETE = "incomplete"
"""The verdict when the two versions were compared at fewer than half of the moments (one
errored or was released mid-way): a win rate over the rest is no verdict on the versions."""


def comparison_incomplete(compared: int, moments: int) -> bool:
    return moments > 0 and 2 * compared < moments


def verdict_of(low: float | None, high: float | None) -> str:
    """ "won" when the whole interval is above a half, "lost" when below, else "even"."""
    if low is None or high is None:
        return ""
    return verdict(low, high, chance=CHANCE)


# --- a regression: a difference beyond the judge's noise ---------------------------------------
#
# A call's difference is the mean, over its judged turns (up to four), of the candidate's judge
# total less the baseline's at the same moment. How far that mean moves by chance is set by how
# much the paired difference varies from turn to turn: the judge's own scoring noise and the
# replies' turn-to-turn variation together. One call's four turns are too few to estimate that
# spread (a bootstrap over four values gives an interval far too narrow), so the spread is
# pooled over every call of the evaluation: each turn's difference about its own call's mean, so
# a version that does consistently worse on a call does not widen it. A call's noise is then
# z · spread / √(its turns), z for the evaluation's confidence (95%, as the win rate's
# interval), and a call is a regression only when its difference lies below minus that. No
# threshold is chosen by hand: a judge whose totals all sit within 0.50–0.51 has a spread to
# match, and a difference of −0.0002 on such a judge lies within it.


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def call_difference_noise(
    differences_by_call: Sequence[Sequence[float]], *, confidence: float = CONFIDENCE
) -> dict[str, float | int | None]:
    """The evaluation's noise of a call's difference (see the comment above): "spread" (the
    per-turn paired difference's standard deviation within calls, pooled; None when no call has
    two turns compared), "degrees" (its degrees of freedom), "calls" (how many calls it pools),
    "z" and "confidence"."""
    calls = [list(differences) for differences in differences_by_call if len(differences) > 1]
    degrees = sum(len(differences) - 1 for differences in calls)
    squares = sum(
        (difference - sum(differences) / len(differences)) ** 2
        for differences in calls
        for difference in differences
    )
    spread = math.sqrt(squares / degrees) if degrees else None
    return {
        "spread": round(spread, 6) if spread is not None else None,
        "degrees": degrees,
        "calls": len(calls),
        "z": round(_z(confidence), 4),
        "confidence": confidence,
    }


def noise_of_call(noise: dict[str, float | int | None], turns: int) -> float | None:
    """How far a call's difference over `turns` judged turns moves by chance: z · spread / √turns
    (None when the spread is not measured or the call has no turn compared)."""
    spread, z = noise.get("spread"), noise.get("z")
    if spread is None or z is None or turns <= 0:
        return None
    return round(float(z) * float(spread) / math.sqrt(turns), 6)


def beyond_noise_below(difference: float | None, noise: float | None) -> bool:
    """Whether a call's difference is a regression: below zero by more than its noise (and
    than float noise, so equal replies never count)."""
    if difference is None or noise is None:
        return False
    return difference < -max(noise, TIE_TOLERANCE)


def mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


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


# --- where the lens draws its bands ------------------------------------------------------------
#
# A world's opening scores can bunch: on one judge a fifth of the calls spread over 0.376–0.505
# and the other four fifths within 0.505–0.518, so on an axis of scores four of the five
# equal-count bands were slivers whose labels overlapped. The lens therefore draws its bands on
# the world's own score distribution: each band spans its share of the world's scored calls
# (from the share below it to the share at its top), so equal-count bands are equally wide
# however their scores bunch, and each is labelled with its score range. A version's score is
# placed at its share of the world's calls scoring below it (ties count half), which falls
# inside the band its score falls in.


def share_below(ordered_scores: Sequence[float], score: float) -> float:
    """The share of the (sorted) scores below `score`, ties counted half: where a score sits in
    the world's own distribution (0 below every call, 1 above every one)."""
    if not ordered_scores:
        return 0.0
    below = bisect_left(ordered_scores, score)
    tied = bisect_right(ordered_scores, score) - below
    return round((below + tied / 2) / len(ordered_scores), 4)


def won_rate_by_score_band(
    calls: Sequence[tuple[float, bool]], *, bands: int
) -> tuple[list[float], list[dict[str, float | int | None]]]:
    """(inner edges, one row per band): the calls' score range, count, won count, won rate
    and its Wilson interval, and the span of the world's calls it is drawn over ("share_low"
    to "share_high", see above), lowest band first."""
    if not calls:
        return [], []
    scores = [score for score, _won in calls]
    edges = band_edges(scores, bands)
    rows: list[dict[str, float | int | None]] = []
    members: list[list[tuple[float, bool]]] = [[] for _ in range(len(edges) + 1)]
    for score, won in calls:
        members[band_of(edges, score)].append((score, won))
    counted = 0
    for index, band in enumerate(members):
        share_low = counted / len(calls)
        counted += len(band)
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
                "share_low": round(share_low, 4),
                "share_high": round(counted / len(calls), 4),
            }
        )
    return edges, rows
