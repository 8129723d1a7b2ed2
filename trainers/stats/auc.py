"""The area under the ROC curve: the one definition every measure of a ranking uses.

Mann–Whitney's U over the positive and negative scores, ties counting half, divided by the
number of (positive, negative) pairs. Pure numpy; never imports Django.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _u_and_pairs(scores: np.ndarray, positive: np.ndarray) -> tuple[float, int]:
    """Mann–Whitney's U of the positives (ties half) and the pairs it is counted over."""
    n_pos = int(positive.sum())
    pairs = n_pos * (len(positive) - n_pos)
    if pairs == 0:
        return 0.0, 0
    # Ranks 1..n, tied scores sharing the mean of their ranks.
    _values, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    ranks = ((upper - counts + 1 + upper) / 2.0)[inverse.ravel()]
    return float(ranks[positive].sum() - n_pos * (n_pos + 1) / 2), pairs


def _arrays(scores: Sequence[float], labels: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(scores, dtype=float).ravel(), np.asarray(labels).astype(bool).ravel()


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve (ties count half); None when one class is missing.
    `labels` may be booleans or 0/1."""
    values, positive = _arrays(scores, labels)
    u, pairs = _u_and_pairs(values, positive)
    return u / pairs if pairs else None


def stratified_auc(
    scores: Sequence[float], labels: Sequence[bool], strata: Sequence[object]
) -> float | None:
    """The AUC counting only (positive, negative) pairs of the same stratum: each stratum's U
    summed, over all strata's pairs. Where scores come from a different fit per stratum (a
    cross-validation fold), ranking across strata would measure the fits' offsets too."""
    values, positive = _arrays(scores, labels)
    keys = np.asarray([str(stratum) for stratum in strata])
    total_u, total_pairs = 0.0, 0
    for stratum in sorted(set(keys.tolist())):
        inside = keys == stratum
        u, pairs = _u_and_pairs(values[inside], positive[inside])
        total_u, total_pairs = total_u + u, total_pairs + pairs
    return total_u / total_pairs if total_pairs else None
