"""The learned scorer's base part: linear heads on what the base reads in a reply
(trainers.reading.base_features), and whether the words (the TF-IDF heads of trainers.judge.fit)
stay beside them (pure Python, no Django).

Each head comes in three kinds, scored fold by fold on the training part (never the held-out
part, where all three are then measured side by side):

  base          the base's head alone
  words + base  the two heads' logits mixed by a small logistic fit on their out-of-fold logits
  words         the TF-IDF head alone (the fast path; also what a machine without the base uses)

and the fit keeps one by trainers.judge.scorer_choice's rule, the one every choice among
scorers uses: the first in that order (the reader a policy can least fool first) that the
best-scoring kind does not beat beyond the folds' spread (one standard error of the per-fold
difference). A difference of noise keeps the base.

Out of fold: the training part is cut into five folds by group (a pair, or a call); each fold's
logits come from heads fitted on the other four, at the strengths the full fit chose. The
mix's own two or three numbers are cross-fitted the same way before they are scored, so a
mix is not scored on the rows that set it. A world with reviewers' overrides keeps the words:
the overrides teach the words' head, and a judge that dropped it would ignore them.

Totals are Bradley–Terry (no intercept: a total's level is set afterwards, centred on the
picked replies); the won head is logistic with an intercept, scored by the AUC by call of its
turns' mean probability, as the fit's held-out measure is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainers.judge.scorer_choice import choose_scorer
from trainers.reading.head_fit import feature_spread, fit_by_group
from trainers.stats.auc import auc, stratified_auc
from trainers.stats.logistic import logistic_fit, sigmoid

FOLDS = 5
BASE = "base"
MIXED = "words + base"
WORDS = "words"
# Fewer training pairs (or outcome calls) than this and the base's head is not fitted.
MIN_PAIRS = 20
MIN_CALLS = 10

# (training row indices, other row indices) -> the words' logits of the other rows.
WordsLogits = Callable[[np.ndarray, np.ndarray], np.ndarray]


def fold_of(groups: Sequence[str], *, seed: int) -> np.ndarray:
    """Each row's fold, by a hash of its group (a group's rows share one fold)."""
    folds = []
    for group in groups:
        digest = hashlib.sha256(f"fold:{seed}:{group}".encode()).digest()
        folds.append(int.from_bytes(digest[:8], "big") * FOLDS // 2**64)
    return np.asarray(folds)


@dataclass
class HeadFit:
    weights: np.ndarray
    bias: float
    strength: float


def pair_head(
    difference: np.ndarray, groups: Sequence[str], *, strength: float | None, grid: Sequence[float]
) -> HeadFit:
    """Bradley–Terry on chosen-minus-rejected features: both orders, no intercept, the rows
    scaled so one strength suits every feature (folded back into the weights)."""
    both = np.vstack([difference, -difference]).astype(np.float64)
    spread = feature_spread(both)
    labels = np.concatenate([np.ones(len(difference)), np.zeros(len(difference))])
    fitted = fit_by_group(
        both / spread,
        labels,
        np.concatenate([np.asarray(groups), np.asarray(groups)]),
        grid=(strength,) if strength is not None else grid,
        fit_intercept=False,
        scoring="accuracy",
    )
    return HeadFit(fitted.weights / spread, 0.0, fitted.strength)


def won_head(
    features: np.ndarray,
    won: np.ndarray,
    groups: Sequence[str],
    *,
    strength: float | None,
    grid: Sequence[float],
) -> HeadFit:
    """The logistic loss on won/lost, with an intercept, the rows scaled as `pair_head`'s."""
    rows = features.astype(np.float64)
    spread = feature_spread(rows)
    fitted = fit_by_group(
        rows / spread,
        won.astype(float),
        np.asarray(groups),
        grid=(strength,) if strength is not None else grid,
        fit_intercept=True,
        scoring="roc_auc",
    )
    return HeadFit(fitted.weights / spread, float(fitted.bias), fitted.strength)


def _mix_fit(columns: np.ndarray, labels: np.ndarray, *, intercept: bool) -> np.ndarray:
    """The mix's numbers: a lightly regularised logistic fit on the heads' logits."""
    fitted = logistic_fit(columns, labels, strength=10.0, fit_intercept=intercept, max_iter=1000)
    return np.append(fitted.weights, fitted.bias)


def _cross_fitted_mix(
    columns: np.ndarray, labels: np.ndarray, folds: np.ndarray, *, intercept: bool
) -> np.ndarray:
    """Each row's mixed logit from a mix fitted on the other folds' rows."""
    mixed = np.zeros(len(labels))
    for fold in range(FOLDS):
        inside = folds == fold
        if not inside.any():
            continue
        if len(set(labels[~inside].tolist())) < 2:
            return columns[:, 1].copy()
        mix = _mix_fit(columns[~inside], labels[~inside], intercept=intercept)
        mixed[inside] = columns[inside] @ mix[:-1] + mix[-1]
    return mixed


def _pick(scores: dict[str, float | None], allowed: Sequence[str]) -> str:
    """The kind kept from one score each (no folds, so no spread: the best, a tie to the one
    listed first), by the same rule as `_choose`; the words where nothing could be scored."""
    return _choose({kind: [score] for kind, score in scores.items()}, allowed)[0]


def _choose(
    per_fold: dict[str, list[float | None]], allowed: Sequence[str]
) -> tuple[str, dict[str, Any]]:
    """The kind kept by trainers.judge.scorer_choice's rule among the allowed ones (in the
    order of preference), and the rule's figures; the words where nothing could be scored (a
    fold with one label only has no AUC)."""
    choice = choose_scorer(per_fold, allowed)
    return choice.kind or WORDS, choice.described()


@dataclass
class MixedHead:
    """One head of the learned scorer: the base's weights (None for the words alone) and the
    mix of logits, [words, base, bias]."""

    kind: str
    weights: np.ndarray | None
    mix: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0])
    chosen_by: dict[str, Any] = field(default_factory=dict)

    def logits(self, words_logits: np.ndarray, features: np.ndarray | None) -> np.ndarray:
        base = (
            features.astype(np.float64) @ self.weights
            if self.weights is not None and features is not None and self.mix[1] != 0.0
            else np.zeros(len(words_logits))
        )
        return self.mix[0] * words_logits + self.mix[1] * base + self.mix[2]


# --- the total: picks -----------------------------------------------------------------------


def fit_total(
    chosen: np.ndarray,
    rejected: np.ndarray,
    groups: Sequence[str],
    words_margins: WordsLogits,
    *,
    keep_words: bool,
    grid: Sequence[float],
    seed: int,
) -> MixedHead | None:
    """The total's head over the training pairs (features of each side, their groups);
    `words_margins` gives the words' chosen-minus-rejected logits of held rows from a fit on
    others. None with too few pairs for the base to be worth a head."""
    if len(chosen) < MIN_PAIRS:
        return None
    difference = chosen.astype(np.float64) - rejected.astype(np.float64)
    full = pair_head(difference, groups, strength=None, grid=grid)
    folds = fold_of(groups, seed=seed)
    words_oof, base_oof = np.zeros(len(difference)), np.zeros(len(difference))
    for fold in range(FOLDS):
        inside = folds == fold
        if not inside.any() or inside.all():
            continue
        train, held = np.flatnonzero(~inside), np.flatnonzero(inside)
        words_oof[held] = words_margins(train, held)
        part = pair_head(
            difference[train], [groups[i] for i in train], strength=full.strength, grid=grid
        )
        base_oof[held] = difference[held] @ part.weights
    # Both orders, so the mix needs no intercept and has no side to prefer.
    columns = np.vstack(
        [np.column_stack([words_oof, base_oof]), -np.column_stack([words_oof, base_oof])]
    )
    labels = np.concatenate([np.ones(len(difference)), np.zeros(len(difference))])
    mixed_oof = _cross_fitted_mix(columns, labels, np.concatenate([folds, folds]), intercept=False)
    agree = {
        BASE: base_oof > 0,
        MIXED: mixed_oof[: len(difference)] > 0,
        WORDS: words_oof > 0,
    }
    scores = {kind: float(np.mean(right)) for kind, right in agree.items()}
    per_fold = {
        kind: [float(np.mean(right[folds == fold])) for fold in np.unique(folds)]
        for kind, right in agree.items()
    }
    kind, rule = _choose(per_fold, [MIXED, WORDS] if keep_words else [BASE, MIXED, WORDS])
    mix = {BASE: [0.0, 1.0, 0.0], WORDS: [1.0, 0.0, 0.0]}.get(kind)
    if mix is None:
        mix = _mix_fit(columns, labels, intercept=False).tolist()
    chosen_by = {
        "out_of_fold_accuracy": {k: round(v, 4) for k, v in scores.items()},
        "per_fold_accuracy": {k: [round(v, 4) for v in f] for k, f in per_fold.items()},
        **rule,
        "strength": full.strength,
        "pairs": len(difference),
    }
    # The base's weights are kept even where the words won: the fit measures the base alone too.
    return MixedHead(kind, full.weights, mix, chosen_by)


# --- won: outcomes --------------------------------------------------------------------------


def _auc_by_call(
    logits: np.ndarray, won: np.ndarray, groups: Sequence[str], folds: np.ndarray
) -> float | None:
    """The AUC, over calls, of each call's mean won-probability (ties count half), counting
    only a won and a lost call of the same fold: each fold's scores come from a head (and a
    mix) fitted on the other folds, whose intercept leans against the fold's own share of won
    calls (fewer won calls outside it, more inside), so ranking calls across folds measures
    that lean too (pooled, the demo's fit on its 92 training calls scored its mix 0.27, far
    below chance)."""
    means, call_won, call_fold = _by_call(logits, won, groups, folds)
    return stratified_auc(means, call_won, call_fold)


def _by_call(
    logits: np.ndarray, won: np.ndarray, groups: Sequence[str], folds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each call's mean won-probability, whether it was won, and its fold."""
    by_call: dict[str, list[float]] = {}
    call_won: dict[str, bool] = {}
    call_fold: dict[str, int] = {}
    for probability, label, group, fold in zip(sigmoid(logits), won, groups, folds, strict=True):
        by_call.setdefault(group, []).append(float(probability))
        call_won[group], call_fold[group] = bool(label), int(fold)
    calls = list(by_call)
    return (
        np.asarray([np.mean(by_call[call]) for call in calls]),
        np.asarray([call_won[call] for call in calls]),
        np.asarray([call_fold[call] for call in calls]),
    )


def _auc_by_call_per_fold(
    logits: np.ndarray, won: np.ndarray, groups: Sequence[str], folds: np.ndarray
) -> list[float | None]:
    """Each fold's AUC over its own calls (each call's mean won-probability), None for a fold
    without both a won and a lost call: what the choice's spread is read from."""
    means, call_won, call_fold = _by_call(logits, won, groups, folds)
    return [auc(means[call_fold == fold], call_won[call_fold == fold]) for fold in np.unique(folds)]


def _without_fold_lean(columns: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Out-of-fold logits with each fold's lean taken out (its mean moved to the overall
    mean): the mix of the words and the base learns from how they rank turns, not from how
    each fold's heads lean against its share of won calls (_auc_by_call), which across folds
    runs against the labels and taught the demo's mix weights that ranked below chance."""
    level = columns.mean(axis=0)
    steady = columns.copy()
    for fold in np.unique(folds):
        inside = folds == fold
        steady[inside] += level - columns[inside].mean(axis=0)
    return steady


def fit_won(
    features: np.ndarray,
    won: np.ndarray,
    groups: Sequence[str],
    words_logits: WordsLogits,
    *,
    grid: Sequence[float],
    seed: int,
) -> MixedHead | None:
    """The won head over the training turns (features, won/lost, their calls); `words_logits`
    gives the words' logits of held turns from a fit on others. None with too few calls or
    one label only."""
    won = np.asarray(won, dtype=bool)
    if len(set(groups)) < MIN_CALLS or len(set(won.tolist())) < 2:
        return None
    full = won_head(features, won, groups, strength=None, grid=grid)
    folds = fold_of(groups, seed=seed)
    words_oof, base_oof = np.zeros(len(won)), np.zeros(len(won))
    for fold in range(FOLDS):
        inside = folds == fold
        train, held = np.flatnonzero(~inside), np.flatnonzero(inside)
        if not len(held) or len(set(won[train].tolist())) < 2:
            continue
        words_oof[held] = words_logits(train, held)
        part = won_head(
            features[train],
            won[train],
            [groups[i] for i in train],
            strength=full.strength,
            grid=grid,
        )
        base_oof[held] = features[held].astype(np.float64) @ part.weights + part.bias
    columns = _without_fold_lean(np.column_stack([words_oof, base_oof]), folds)
    mixed_oof = _cross_fitted_mix(columns, won.astype(float), folds, intercept=True)
    scores = {
        BASE: _auc_by_call(base_oof, won, groups, folds),
        MIXED: _auc_by_call(mixed_oof, won, groups, folds),
        WORDS: _auc_by_call(words_oof, won, groups, folds),
    }
    per_fold = {
        kind: _auc_by_call_per_fold(logits, won, groups, folds)
        for kind, logits in ((BASE, base_oof), (MIXED, mixed_oof), (WORDS, words_oof))
    }
    kind, rule = _choose(per_fold, [BASE, MIXED, WORDS])
    if kind == BASE:
        mix = [0.0, 1.0, full.bias]
    elif kind == WORDS:
        mix = [1.0, 0.0, 0.0]
    else:
        mix = _mix_fit(columns, won.astype(float), intercept=True).tolist()
    chosen_by = {
        "out_of_fold_auc_by_call": {
            k: None if v is None else round(v, 4) for k, v in scores.items()
        },
        "per_fold_auc_by_call": {
            k: [None if v is None else round(v, 4) for v in f] for k, f in per_fold.items()
        },
        **rule,
        "strength": full.strength,
        "turns": len(won),
    }
    return MixedHead(kind, full.weights, mix, chosen_by)


# --- the part a fitted judge keeps ----------------------------------------------------------


@dataclass
class LearnedPart:
    """The base a fitted judge reads replies with, and its total and won heads on it."""

    base: str
    total: MixedHead | None
    won: MixedHead | None
    features: dict[str, Any] = field(default_factory=dict)  # what reading them cost
    # The world's floor of "does the reply answer the call" (trainers.judge.answers), measured
    # on its own agent turns with this base; None where there were too few to place it.
    answers_floor: float | None = None
    answers_sample: int = 0
    # Those own turns' scores, ascending: what the guard ranks a reply's answer score against
    # (its joint test with the words); empty where there is no floor.
    answers_own: np.ndarray | None = None

    def kinds(self) -> dict[str, str | None]:
        return {
            "total": self.total.kind if self.total else None,
            "won": self.won.kind if self.won else None,
        }

    def heads_read_base(self) -> bool:
        """Whether a kept head scores with the base's features (else the words scored)."""
        return any(kind and kind != WORDS for kind in self.kinds().values())

    def arrays(self) -> dict[str, np.ndarray]:
        heads = {"total": self.total, "won": self.won}
        arrays = {
            f"learned:{name}": head.weights
            for name, head in heads.items()
            if head is not None and head.weights is not None
        }
        if self.answers_own is not None and len(self.answers_own):
            arrays["learned:answers_own"] = np.asarray(self.answers_own, dtype=np.float64)
        return arrays

    def described(self) -> dict[str, Any]:
        def head(part: MixedHead | None) -> dict[str, Any] | None:
            if part is None:
                return None
            return {"kind": part.kind, "mix": list(part.mix), "chosen_by": part.chosen_by}

        return {
            "base": self.base,
            "total": head(self.total),
            "won": head(self.won),
            "features": self.features,
            "answers": {
                "floor": self.answers_floor,
                "sample": self.answers_sample,
                # The guard's joint test with the words (it ranks against answers_own).
                "joint": self.answers_own is not None and len(self.answers_own) > 0,
            },
        }

    @classmethod
    def from_saved(
        cls, described: dict[str, Any] | None, arrays: dict[str, np.ndarray]
    ) -> LearnedPart | None:
        if not described:
            return None

        def head(name: str) -> MixedHead | None:
            saved = described.get(name)
            if not saved:
                return None
            return MixedHead(
                saved["kind"],
                arrays.get(f"learned:{name}"),
                [float(x) for x in saved["mix"]],
                saved.get("chosen_by") or {},
            )

        answers = described.get("answers") or {}
        return cls(
            str(described["base"]),
            head("total"),
            head("won"),
            described.get("features") or {},
            answers.get("floor"),
            int(answers.get("sample") or 0),
            arrays.get("learned:answers_own"),
        )
