"""Which of a head's candidate scorers a world's judge keeps: the one rule every choice among
scorers uses (trainers.judge.learned's total and won heads; pure Python, no Django).

The candidates come in an order of preference, the reader a policy can least fool first:

  base          the base's head alone: it reads what a reply says
  words + base  the base beside the TF-IDF words, mixed
  words         the TF-IDF head alone: the vocabulary of this world's picks, which a reply
                stuffed with the words reviewers liked fools, and which sees nothing of a
                reply's meaning

Each candidate is scored on each fold of the training part (out of fold: the heads that score
a fold were fitted on the others). The rule is the one-standard-error rule of model choice
(Breiman et al. 1984; Hastie, Tibshirani & Friedman, The Elements of Statistical Learning
§7.10), with the standard error of the paired per-fold difference:

  the best candidate is the one with the highest mean score over the folds; the fit keeps the
  first candidate, in the order of preference, that the best does not beat beyond the folds'
  spread, i.e. whose mean per-fold shortfall against the best is at most the standard error of
  that per-fold difference (its sample standard deviation over the folds both were scored on,
  divided by the square root of their number).

So a less preferred candidate is kept only when it beats every more preferred one beyond the
spread of their folds; a difference of noise keeps the better reader. (Before this rule the
fit kept whichever mean was higher: on real human preference pairs it kept the words at 0.611
out of fold against 0.606 for words + base, and the words then held 0.602 on held-out pairs
where the base alone held 0.661.)

With fewer than two folds scored for both, no spread can be measured and a shortfall cannot
be shown to be noise: only a tie (or an edge) keeps the preferred one then, as a plain
comparison of means would. With nothing scored at all, the fallback is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# A candidate's score on each fold, None where the fold could not score it (an AUC of a
# fold with one label only).
FoldScores = Sequence[float | None]


@dataclass(frozen=True)
class ScorerChoice:
    """The kept candidate, and the figures the rule read (for the fit's report)."""

    kind: str | None
    best: str | None = None
    means: dict[str, float | None] = field(default_factory=dict)
    # Per candidate: its mean per-fold shortfall against the best and that difference's
    # standard error (None where fewer than two folds scored both).
    against_best: dict[str, dict[str, Any]] = field(default_factory=dict)

    def described(self) -> dict[str, Any]:
        return {
            "rule": "one standard error: the preferred reader unless beaten beyond the folds' "
            "spread",
            "best": self.best,
            "against_best": self.against_best,
        }


def _mean(scores: FoldScores) -> float | None:
    known = [float(score) for score in scores if score is not None]
    return float(np.mean(known)) if known else None


def shortfall(best: FoldScores, other: FoldScores) -> tuple[float, float | None]:
    """The mean per-fold difference best - other over the folds both were scored on, and its
    standard error (None with fewer than two such folds)."""
    differences = np.asarray(
        [b - o for b, o in zip(best, other, strict=True) if b is not None and o is not None],
        dtype=np.float64,
    )
    if not len(differences):
        return 0.0, None
    mean = float(differences.mean())
    if len(differences) < 2:
        return mean, None
    return mean, float(differences.std(ddof=1) / np.sqrt(len(differences)))


def within_spread(difference: float, error: float | None) -> bool:
    """Whether a shortfall is noise: no more than one standard error (with no spread measured,
    only no shortfall at all)."""
    if error is None:
        return difference <= 0.0
    return difference <= error + 1e-12


def choose_scorer(per_fold: Mapping[str, FoldScores], preference: Sequence[str]) -> ScorerChoice:
    """The candidate of `preference` (most preferred first) the rule keeps, from each one's
    per-fold scores (the same folds, in the same order, for every candidate). A candidate
    missing from `per_fold`, or scored on no fold, is not a candidate; kind is None when none
    is."""
    scored = {
        kind: list(per_fold[kind])
        for kind in preference
        if kind in per_fold and _mean(per_fold[kind]) is not None
    }
    means = {kind: _mean(per_fold.get(kind, ())) for kind in preference}
    if not scored:
        return ScorerChoice(None, None, means)
    # Ties of the mean go to the preferred one (the list's order).
    best = max(scored, key=lambda kind: (means[kind], -preference.index(kind)))
    against_best: dict[str, dict[str, Any]] = {}
    kept = None
    for kind in (kind for kind in preference if kind in scored):
        difference, error = shortfall(scored[best], scored[kind])
        against_best[kind] = {
            "shortfall": round(difference, 4),
            "standard_error": None if error is None else round(error, 4),
        }
        # The first within the spread of the best (the best itself is, at no shortfall).
        if kept is None and within_spread(difference, error):
            kept = kind
    return ScorerChoice(kept, best, means, against_best)
