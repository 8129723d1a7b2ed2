"""The fitted judge: a world's judge learned from what the world has, and measured on what it
never saw.

One text featurizer (word and bigram TF-IDF of the reply and of the call so far, the reply's
length, and the rubric's eight numbers as one more feature group) and linear heads on it:

  total      Bradley–Terry over the reviewers' picks (chosen vs rejected, a logistic fit on
             feature differences), with reviewers' overrides of the judge as absolute rows
             (the override's score as a soft label) in the same fit
  dimension  one head per rubric dimension, fitted the same way on the picks where reviewers
             ticked that reason (and the overrides' score for it); a dimension with too few
             such picks keeps the rubric's score, and says so
  won        the probability that the call is won given the call so far and the reply,
             a logistic fit on the opening agent turns of labelled real calls

Everything is measured on a held-out part chosen by group (a call, or a moment) before any fit:
pair accuracy and Cohen's kappa with ties counted apart, per dimension where reasons exist,
and the AUC of the won-probability by call (mean over a call's opening turns); the same
numbers for the rubric side by side, each with a bootstrap interval. The version the world
uses is the one fitted on the training part, so the numbers it shows are about itself.

Pure Python (numpy, scipy, scikit-learn), no Django: `python -m trainers.judge.fit --spec
spec.json --out result.json`, the model written as plain arrays and a vocabulary (no pickles).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from trainers.runtime import Progress, trainer_main

# --- the features -------------------------------------------------------------------------

# Far more words than a world's picks can teach would only add noise to a linear fit.
MAX_VOCABULARY = 40_000
# A dimension head needs this many picks with its reason ticked; below it the rubric answers.
MIN_DIMENSION_PAIRS = 30
# How much of the data is held out (by group), and how many bootstrap resamples to draw.
HELD_OUT_FRACTION = 0.2
BOOTSTRAP = 1000
# The L2 strength of each head (scikit-learn's C) is chosen by 5-fold cross-validation on the
# training part alone, grouped like the held-out split, from this grid; the held-out part is
# never looked at. Below a few dozen rows the library default is used.
REGULARISATION_GRID = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
REGULARISATION_DEFAULT = 1.0
MIN_ROWS_TO_CHOOSE = 60
OPENING_AGENT_TURNS = 4


def _context_text(context: Sequence[Mapping[str, str]]) -> str:
    return " ".join(turn["text"] for turn in context)


def _last_customer(context: Sequence[Mapping[str, str]]) -> str:
    return next((t["text"] for t in reversed(context) if t["speaker"] == "customer"), "")


@dataclass
class Featurizer:
    """TF-IDF over words and bigrams (sublinear tf, l2), fitted once on the training texts."""

    vocabulary: dict[str, int]
    idf: np.ndarray
    extra_size: int

    @classmethod
    def fit(cls, texts: Sequence[str], *, extra_size: int) -> Featurizer:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=MAX_VOCABULARY
        )
        try:
            vectorizer.fit(texts)
        except ValueError:  # too few texts for min_df: every word counts then
            vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
            vectorizer.fit(texts or ["empty"])
        vocabulary = {term: int(index) for term, index in vectorizer.vocabulary_.items()}
        return cls(vocabulary, np.asarray(vectorizer.idf_, dtype=np.float64), extra_size)

    @property
    def size(self) -> int:
        # Reply words, call-so-far words, the reply's log length, the extra (rubric) numbers.
        return 2 * len(self.vocabulary) + 1 + self.extra_size

    def _tfidf(self, texts: Sequence[str]) -> sparse.csr_matrix:
        from sklearn.feature_extraction.text import CountVectorizer

        counts = CountVectorizer(ngram_range=(1, 2), vocabulary=self.vocabulary).transform(texts)
        counts = counts.astype(np.float64)
        counts.data = 1.0 + np.log(counts.data)  # sublinear tf, as at fit time
        weighted = counts.multiply(self.idf).tocsr()
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return sparse.diags(1.0 / norms) @ weighted

    def transform(
        self,
        contexts: Sequence[Sequence[Mapping[str, str]]],
        replies: Sequence[str],
        extras: Sequence[Sequence[float]],
    ) -> sparse.csr_matrix:
        reply_part = self._tfidf(list(replies))
        context_part = self._tfidf([_context_text(c) + " " + _last_customer(c) for c in contexts])
        lengths = np.log1p([len(reply) for reply in replies]).reshape(-1, 1) / 6.0
        extra = np.asarray(extras, dtype=np.float64).reshape(len(replies), self.extra_size)
        return sparse.hstack(
            [reply_part, 0.5 * context_part, sparse.csr_matrix(lengths), sparse.csr_matrix(extra)]
        ).tocsr()


# --- the heads ------------------------------------------------------------------------------


@dataclass
class Head:
    """A linear score sigma(w . x + b)."""

    weights: np.ndarray
    bias: float = 0.0

    def logits(self, features: sparse.csr_matrix) -> np.ndarray:
        return np.asarray(features @ self.weights).ravel() + self.bias

    def scores(self, features: sparse.csr_matrix) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(features)))


def regularisation_grid(rows: Any, labels: np.ndarray, groups: np.ndarray) -> tuple[float, ...]:
    """The strengths a head's fit chooses from: the library default alone for too few rows,
    groups or labels to cross-validate."""
    distinct = len(set(np.asarray(groups).tolist()))
    labels = np.asarray(labels)
    if rows.shape[0] < MIN_ROWS_TO_CHOOSE or distinct < 5 or len(set(labels.tolist())) < 2:
        return (REGULARISATION_DEFAULT,)
    return REGULARISATION_GRID


def regularisation_by_group(
    rows: Any,
    labels: np.ndarray,
    groups: np.ndarray,
    *,
    fit_intercept: bool,
    scoring: str,
    solver: str = "lbfgs",
    deadline: float | None = None,
    batched: bool | None = None,
) -> float:
    """The C of the grid that cross-validates best on these (training) rows, by group. The
    grid runs from the strongest regularisation (the quickest fits) to the weakest; once
    `deadline` (time.monotonic()) passes, no weaker strength is tried and the best of those
    tried is chosen. Dense rows are fitted `batched` in torch by default (trainers.judge.
    head_fit, which the reward models' probe calls itself); sparse TF-IDF rows keep
    scikit-learn's `solver`: their fits cost little, where the batched fit would need a dense
    basis of their span."""
    grid = regularisation_grid(rows, labels, groups)
    if len(grid) == 1:
        return grid[0]
    if batched if batched is not None else not sparse.issparse(rows):
        from trainers.judge.head_fit import fit_by_group

        setting = {"fit_intercept": fit_intercept, "scoring": scoring, "deadline": deadline}
        return fit_by_group(rows, labels, groups, grid=grid, final=False, **setting).strength
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold, cross_val_score

    scores = []
    for strength in grid:
        if scores and deadline is not None and time.monotonic() > deadline:
            break
        model = LogisticRegression(
            C=strength, fit_intercept=fit_intercept, max_iter=2000, solver=solver
        )
        folds = GroupKFold(n_splits=5)
        score = cross_val_score(model, rows, labels, groups=groups, cv=folds, scoring=scoring)
        scores.append(float(np.mean(score)))
    return grid[int(np.argmax(scores))]


def _fit_logistic(
    rows: sparse.csr_matrix, labels: np.ndarray, weights: np.ndarray, *, strength: float
) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=strength, fit_intercept=False, max_iter=2000)
    model.fit(rows, labels, sample_weight=weights)
    return np.asarray(model.coef_).ravel()


def fit_preference_head(
    chosen: sparse.csr_matrix | None,
    rejected: sparse.csr_matrix | None,
    absolute: sparse.csr_matrix | None,
    absolute_targets: np.ndarray | None,
    *,
    size: int,
    seed: int,
) -> Head | None:
    """Bradley–Terry on pick differences plus overrides as absolute rows (a soft label, with
    a bias column only they use), in one logistic fit. None without any data."""
    blocks, labels, weights = [], [], []
    strength = REGULARISATION_DEFAULT
    if chosen is not None and chosen.shape[0]:
        difference = chosen - rejected
        zero = sparse.csr_matrix((difference.shape[0], 1))
        # Both orders, so the fit has no side to prefer and needs no intercept.
        blocks += [sparse.hstack([difference, zero]), sparse.hstack([-difference, zero])]
        labels += [np.ones(difference.shape[0]), np.zeros(difference.shape[0])]
        weights += [np.ones(difference.shape[0])] * 2
        # A pair's two orders share a group, so no fold sees one order and tests the other.
        pair_ids = np.arange(difference.shape[0])
        strength = regularisation_by_group(
            sparse.vstack(blocks).tocsr(),
            np.concatenate(labels),
            np.concatenate([pair_ids, pair_ids]),
            fit_intercept=False,
            scoring="accuracy",
        )
    if absolute is not None and absolute.shape[0]:
        one = sparse.csr_matrix(np.ones((absolute.shape[0], 1)))
        row = sparse.hstack([absolute, one])
        targets = np.clip(absolute_targets, 0.0, 1.0)
        # A score of 0.8 is four parts "good" to one part "poor".
        blocks += [row, row]
        labels += [np.ones(row.shape[0]), np.zeros(row.shape[0])]
        weights += [targets, 1.0 - targets]
    if not blocks:
        return None
    label_vector = np.concatenate(labels)
    if len(set(label_vector.tolist())) < 2:
        return None
    coefficients = _fit_logistic(
        sparse.vstack(blocks).tocsr(), label_vector, np.concatenate(weights), strength=strength
    )
    head = Head(weights=coefficients[:size], bias=float(coefficients[size]))
    if (absolute is None or not absolute.shape[0]) and chosen is not None and chosen.shape[0]:
        # Picks alone rank replies but anchor no level: their logits can sit anywhere, and in
        # the demo every reply scored 0.99999+ (shown as 1.0 everywhere). Centred on the
        # picked replies, a typical one scores 0.5; the ranking, and every verdict, is unchanged.
        head.bias = -float(np.median(head.logits(sparse.vstack([chosen, rejected]).tocsr())))
    return head


def fit_outcome_head(
    features: sparse.csr_matrix, won: np.ndarray, calls: np.ndarray
) -> Head | None:
    from sklearn.linear_model import LogisticRegression

    if features.shape[0] < 4 or len(set(won.tolist())) < 2:
        return None
    strength = regularisation_by_group(features, won, calls, fit_intercept=True, scoring="roc_auc")
    model = LogisticRegression(C=strength, max_iter=2000)
    model.fit(features, won)
    return Head(weights=np.asarray(model.coef_).ravel(), bias=float(model.intercept_[0]))


# --- measuring ------------------------------------------------------------------------------


def _position(group: str, *, seed: int) -> float:
    """Where a group falls in [0, 1): a hash, the same for the same group and seed."""
    digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _held_out(group: str, *, seed: int, fraction: float, fold: int = 0) -> bool:
    """Held out when the group's position falls in the fold's slice of the unit interval:
    fold 0 is the default split; folds 0..1/fraction-1 together tile every group once."""
    low = fold * fraction
    return low <= _position(group, seed=seed) < low + fraction


def _interval(values: np.ndarray, statistic, *, seed: int) -> list[float] | None:
    if len(values) < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = [statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(BOOTSTRAP)]
    draws = [d for d in draws if d is not None and not math.isnan(d)]
    if not draws:
        return None
    return [round(float(np.percentile(draws, 2.5)), 4), round(float(np.percentile(draws, 97.5)), 4)]


def pair_agreement(
    chosen_scores: np.ndarray, rejected_scores: np.ndarray, *, seed: int
) -> dict[str, Any]:
    """How often a judge prefers what reviewers chose: accuracy over all pairs (a tie is not
    agreement), ties counted apart, and Cohen's kappa over the untied ones with each pair shown
    in a seeded random order (so "A" and "B" are equally often the reviewer's)."""
    n = len(chosen_scores)
    if n == 0:
        return {"pairs": 0}
    difference = chosen_scores - rejected_scores
    ties = np.abs(difference) < 1e-9
    agree = (difference > 0) & ~ties
    rng = np.random.default_rng(seed)
    reviewer_a = rng.random(n) < 0.5  # the chosen reply shown as A
    judge_a = np.where(reviewer_a, difference > 0, difference < 0)
    kappa = _kappa(reviewer_a[~ties], judge_a[~ties])
    outcomes = np.where(ties, 0.5, agree.astype(float))  # per pair, for the interval only

    def accuracy(sample: np.ndarray) -> float:
        return float(np.mean(sample == 1.0))

    return {
        "pairs": int(n),
        "accuracy": round(float(agree.mean()), 4),
        "accuracy_ci": _interval(outcomes, accuracy, seed=seed),
        "ties": int(ties.sum()),
        "kappa": None if kappa is None else round(kappa, 4),
        "at_chance": _includes_half(_interval(outcomes, accuracy, seed=seed)),
    }


def _kappa(reviewer: np.ndarray, judge: np.ndarray) -> float | None:
    if len(reviewer) == 0:
        return None
    observed = float(np.mean(reviewer == judge))
    p_reviewer, p_judge = float(np.mean(reviewer)), float(np.mean(judge))
    expected = p_reviewer * p_judge + (1 - p_reviewer) * (1 - p_judge)
    return 0.0 if expected >= 1 else (observed - expected) / (1 - expected)


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """The area under the ROC curve (ties count half); None without both classes."""
    positives, negatives = scores[labels], scores[~labels]
    if len(positives) == 0 or len(negatives) == 0:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([positives, negatives]))
    total = ranks[: len(positives)].sum() - len(positives) * (len(positives) + 1) / 2
    return float(total / (len(positives) * len(negatives)))


def outcome_agreement(
    call_scores: np.ndarray, call_won: np.ndarray, *, seed: int
) -> dict[str, Any]:
    """AUC of a per-call score (mean over the call's opening turns) against the real outcome,
    with a bootstrap interval over calls."""
    value = auc(call_scores, call_won)
    paired = np.column_stack([call_scores, call_won.astype(float)])

    def statistic(sample: np.ndarray) -> float | None:
        return auc(sample[:, 0], sample[:, 1] > 0.5)

    interval = _interval(paired, statistic, seed=seed) if value is not None else None
    return {
        "calls": int(len(call_scores)),
        "won": int(call_won.sum()),
        "auc": None if value is None else round(value, 4),
        "auc_ci": interval,
        "at_chance": _includes_half(interval),
    }


def _includes_half(interval: list[float] | None) -> bool | None:
    """No better than chance: the interval reaches down to a half (or lies below it — a judge
    that disagrees with reviewers, or ties them, is no yardstick either)."""
    return None if interval is None else interval[0] <= 0.5


def reliability(probabilities: np.ndarray, won: np.ndarray, *, bins: int = 10) -> list[dict]:
    """Predicted won-probability against the won share, in equal-width bins (the plot)."""
    rows = []
    edges = np.linspace(0.0, 1.0, bins + 1)
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (probabilities >= low) & (probabilities < high if high < 1 else probabilities <= 1)
        if inside.any():
            rows.append(
                {
                    "predicted": round(float(probabilities[inside].mean()), 4),
                    "observed": round(float(won[inside].mean()), 4),
                    "count": int(inside.sum()),
                }
            )
    return rows


# --- the fitted judge, whole ----------------------------------------------------------------


def _shown(value: float, digits: int | None) -> float:
    return float(value) if digits is None else round(float(value), digits)


@dataclass
class FittedJudgeModel:
    """What a fit leaves: the featurizer and its heads (None: not enough data for that head)."""

    dimensions: list[str]
    featurizer: Featurizer
    total: Head | None
    by_dimension: dict[str, Head | None]
    won: Head | None
    meta: dict[str, Any] = field(default_factory=dict)

    def score(
        self,
        contexts: Sequence[Sequence[Mapping[str, str]]],
        replies: Sequence[str],
        rubric: Sequence[Sequence[float]],
        *,
        digits: int | None = 4,
    ) -> list[dict[str, Any]]:
        """Scores for each (context, reply): {"scores": {dim: 0..1}, "total", "won_probability"}.
        `rubric` holds the rubric's numbers for each: its seven dimensions, then its total.
        `digits` rounds what a user is shown; measuring reads the unrounded scores (None), or
        two near-equal scores would count as a tie."""
        features = self.featurizer.transform(contexts, replies, rubric)
        rubric_array = np.asarray(rubric, dtype=np.float64).reshape(len(replies), -1)
        totals = self.total.scores(features) if self.total else rubric_array[:, -1]
        per_dimension = {}
        for index, name in enumerate(self.dimensions):
            head = self.by_dimension.get(name)
            per_dimension[name] = head.scores(features) if head else rubric_array[:, index]
        won = self.won.scores(features) if self.won else None
        return [
            {
                "scores": {
                    name: _shown(per_dimension[name][i], digits) for name in self.dimensions
                },
                "total": _shown(totals[i], digits),
                "won_probability": None if won is None else _shown(won[i], digits),
            }
            for i in range(len(replies))
        ]

    # Plain files: arrays in an .npz (no pickles), the vocabulary and the rest in JSON.
    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {"idf": self.featurizer.idf}
        heads = {"total": self.total, "won": self.won}
        heads.update({f"dimension:{name}": head for name, head in self.by_dimension.items()})
        biases = {}
        for name, head in heads.items():
            if head is not None:
                arrays[f"weights:{name}"] = head.weights
                biases[name] = head.bias
        np.savez(folder / "judge.npz", **arrays)
        (folder / "judge.json").write_text(
            json.dumps(
                {
                    "dimensions": self.dimensions,
                    "vocabulary": self.featurizer.vocabulary,
                    "extra_size": self.featurizer.extra_size,
                    "biases": biases,
                    "meta": self.meta,
                }
            )
        )

    @classmethod
    def load(cls, folder: Path) -> FittedJudgeModel:
        described = json.loads((folder / "judge.json").read_text())
        with np.load(folder / "judge.npz", allow_pickle=False) as arrays:
            loaded = {name: np.array(arrays[name]) for name in arrays.files}

        def head(name: str) -> Head | None:
            key = f"weights:{name}"
            return Head(loaded[key], described["biases"][name]) if key in loaded else None

        return cls(
            dimensions=list(described["dimensions"]),
            featurizer=Featurizer(
                {k: int(v) for k, v in described["vocabulary"].items()},
                loaded["idf"],
                int(described["extra_size"]),
            ),
            total=head("total"),
            by_dimension={name: head(f"dimension:{name}") for name in described["dimensions"]},
            won=head("won"),
            meta=described.get("meta", {}),
        )


@dataclass(frozen=True)
class JudgeFitSpec:
    dimensions: list[str]
    pairs: list[dict[str, Any]]
    overrides: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    seed: int = 0
    held_out_fraction: float = HELD_OUT_FRACTION
    output_dir: str = ""
    # Which slice is held out (cross-validation in the benchmark); 0 for a world's fit.
    held_out_fold: int = 0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JudgeFitSpec:
        dimensions = raw.get("dimensions")
        if not isinstance(dimensions, list) or not dimensions:
            raise ValueError("'dimensions' must list the judge's dimensions.")
        fraction = float(raw.get("held_out_fraction", HELD_OUT_FRACTION))
        if not 0.05 <= fraction <= 0.5:
            raise ValueError("'held_out_fraction' must be between 0.05 and 0.5.")
        return cls(
            dimensions=[str(name) for name in dimensions],
            pairs=list(raw.get("pairs") or []),
            overrides=list(raw.get("overrides") or []),
            outcomes=list(raw.get("outcomes") or []),
            seed=int(raw.get("seed") or 0),
            held_out_fraction=fraction,
            output_dir=str(raw.get("output_dir") or ""),
        )


def held_out_part(
    rows: list[dict[str, Any]], *, seed: int = 0, fraction: float = HELD_OUT_FRACTION
) -> list[dict[str, Any]]:
    """The rows a world's fit holds out (the same split `fit` makes): where any judge of the
    world, a model judge too, is measured."""
    return split_rows(rows, seed=seed, fraction=fraction)[1]


def split_rows(
    rows: list[dict[str, Any]], *, seed: int, fraction: float, fold: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training, held out) by group: a row's call or pair, never one row at a time."""
    train, held = [], []
    for row in rows:
        group = str(row.get("group") or row.get("id") or json.dumps(row.get("context", [])))
        held_out = _held_out(group, seed=seed, fraction=fraction, fold=fold)
        (held if held_out else train).append(row)
    return train, held


def _split(rows: list[dict[str, Any]], spec: JudgeFitSpec) -> tuple[list, list]:
    return split_rows(
        rows, seed=spec.seed, fraction=spec.held_out_fraction, fold=spec.held_out_fold
    )


def _texts(pairs, overrides, outcomes) -> list[str]:
    texts = []
    for row in pairs:
        texts += [row["chosen"], row["rejected"], _context_text(row["context"])]
    for row in [*overrides, *outcomes]:
        texts += [row["reply"], _context_text(row["context"])]
    return texts


def _pair_features(featurizer: Featurizer, pairs: list[dict[str, Any]]):
    contexts = [row["context"] for row in pairs]
    chosen = featurizer.transform(
        contexts, [row["chosen"] for row in pairs], [row["rubric_chosen"] for row in pairs]
    )
    rejected = featurizer.transform(
        contexts, [row["rejected"] for row in pairs], [row["rubric_rejected"] for row in pairs]
    )
    return chosen, rejected


def _override_features(featurizer: Featurizer, overrides: list[dict[str, Any]]):
    if not overrides:
        return None
    return featurizer.transform(
        [row["context"] for row in overrides],
        [row["reply"] for row in overrides],
        [row["rubric"] for row in overrides],
    )


def per_call_scores(
    rows: list[dict[str, Any]], scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A call's score: the mean over its opening agent turns; and whether it was won."""
    by_call: dict[str, list[float]] = {}
    won: dict[str, bool] = {}
    for row, value in zip(rows, scores, strict=True):
        by_call.setdefault(str(row["group"]), []).append(float(value))
        won[str(row["group"])] = bool(row["won"])
    calls = sorted(by_call)
    return (
        np.asarray([np.mean(by_call[c]) for c in calls]),
        np.asarray([won[c] for c in calls], dtype=bool),
    )


def fit(spec: JudgeFitSpec, progress: Progress | None = None) -> tuple[FittedJudgeModel, dict]:
    """Fit on the training part; measure the fit and the rubric on the held-out part."""
    started = time.monotonic()

    def step(done: int, **metrics: Any) -> None:
        if progress is not None:
            progress(done, 4, **metrics)

    train_pairs, held_pairs = _split(spec.pairs, spec)
    train_outcomes, held_outcomes = _split(spec.outcomes, spec)
    overrides = spec.overrides  # few and deliberate: all of them teach
    extra_size = len(spec.dimensions) + 1
    featurizer = Featurizer.fit(
        _texts(train_pairs, overrides, train_outcomes), extra_size=extra_size
    )
    step(1, stage="features", vocabulary=len(featurizer.vocabulary))

    size = featurizer.size
    chosen, rejected = _pair_features(featurizer, train_pairs) if train_pairs else (None, None)
    absolute = _override_features(featurizer, overrides)
    override_totals = np.asarray([float(row["total"]) for row in overrides]) if overrides else None
    total = fit_preference_head(
        chosen, rejected, absolute, override_totals, size=size, seed=spec.seed
    )
    by_dimension: dict[str, Head | None] = {}
    for name in spec.dimensions:
        ticked = [i for i, row in enumerate(train_pairs) if name in (row.get("reasons") or [])]
        scored = [i for i, row in enumerate(overrides) if name in (row.get("scores") or {})]
        if len(ticked) < MIN_DIMENSION_PAIRS and not scored:
            by_dimension[name] = None
            continue
        enough = len(ticked) >= MIN_DIMENSION_PAIRS
        by_dimension[name] = fit_preference_head(
            chosen[ticked] if enough else None,
            rejected[ticked] if enough else None,
            absolute[scored] if scored else None,
            np.asarray([float(overrides[i]["scores"][name]) for i in scored]) if scored else None,
            size=size,
            seed=spec.seed,
        )
    step(2, stage="preference heads", pairs=len(train_pairs), overrides=len(overrides))

    won_head = None
    if train_outcomes:
        outcome_features = featurizer.transform(
            [row["context"] for row in train_outcomes],
            [row["reply"] for row in train_outcomes],
            [row["rubric"] for row in train_outcomes],
        )
        won_head = fit_outcome_head(
            outcome_features,
            np.asarray([bool(row["won"]) for row in train_outcomes]),
            np.asarray([str(row["group"]) for row in train_outcomes]),
        )
    step(3, stage="outcome head", turns=len(train_outcomes))

    model = FittedJudgeModel(spec.dimensions, featurizer, total, by_dimension, won_head)
    report = measure(model, held_pairs, held_outcomes, seed=spec.seed)
    report["trained_on"] = {
        "pairs": len(train_pairs),
        "overrides": len(overrides),
        "outcome_turns": len(train_outcomes),
        "outcome_calls": len({str(row["group"]) for row in train_outcomes}),
        "dimension_heads": sorted(name for name, head in by_dimension.items() if head),
    }
    report["fit_seconds"] = round(time.monotonic() - started, 2)
    model.meta = {"trained_on": report["trained_on"], "seed": spec.seed}
    step(4, stage="measured")
    return model, report


def measure(
    model: FittedJudgeModel,
    pairs: list[dict[str, Any]],
    outcomes: list[dict[str, Any]],
    *,
    seed: int,
) -> dict[str, Any]:
    """The fitted judge's and the rubric's agreement on rows neither was fitted on."""
    report: dict[str, Any] = {"held_out": {"pairs": len(pairs), "outcome_turns": len(outcomes)}}
    if pairs:
        contexts = [row["context"] for row in pairs]
        chosen = model.score(
            contexts, [r["chosen"] for r in pairs], [r["rubric_chosen"] for r in pairs], digits=None
        )
        rejected = model.score(
            contexts,
            [r["rejected"] for r in pairs],
            [r["rubric_rejected"] for r in pairs],
            digits=None,
        )
        fitted_c = np.asarray([s["total"] for s in chosen])
        fitted_r = np.asarray([s["total"] for s in rejected])
        rubric_c = np.asarray([r["rubric_chosen"][-1] for r in pairs])
        rubric_r = np.asarray([r["rubric_rejected"][-1] for r in pairs])
        report["pairs"] = {
            "fitted": pair_agreement(fitted_c, fitted_r, seed=seed),
            "rubric": pair_agreement(rubric_c, rubric_r, seed=seed),
        }
        per_dimension = {}
        for index, name in enumerate(model.dimensions):
            ticked = [i for i, row in enumerate(pairs) if name in (row.get("reasons") or [])]
            if not ticked:
                continue
            per_dimension[name] = {
                "fitted": pair_agreement(
                    np.asarray([chosen[i]["scores"][name] for i in ticked]),
                    np.asarray([rejected[i]["scores"][name] for i in ticked]),
                    seed=seed,
                ),
                "rubric": pair_agreement(
                    np.asarray([pairs[i]["rubric_chosen"][index] for i in ticked]),
                    np.asarray([pairs[i]["rubric_rejected"][index] for i in ticked]),
                    seed=seed,
                ),
                "own_head": model.by_dimension.get(name) is not None,
            }
        report["dimensions"] = per_dimension
    if outcomes and model.won is not None:
        scored = model.score(
            [row["context"] for row in outcomes],
            [row["reply"] for row in outcomes],
            [row["rubric"] for row in outcomes],
            digits=None,
        )
        won_turns = np.asarray([s["won_probability"] for s in scored])
        fitted_calls, won_calls = per_call_scores(outcomes, won_turns)
        rubric_calls, _ = per_call_scores(
            outcomes, np.asarray([row["rubric"][-1] for row in outcomes])
        )
        report["outcomes"] = {
            "fitted": outcome_agreement(fitted_calls, won_calls, seed=seed),
            "rubric": outcome_agreement(rubric_calls, won_calls, seed=seed),
            "reliability": reliability(fitted_calls, won_calls),
        }
    return report


def run(spec_dict: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
    """Fit, measure, and write the model to the spec's output_dir; returns plain values."""
    spec = JudgeFitSpec.from_dict(spec_dict)
    model, report = fit(spec, progress)
    if spec.output_dir:
        model.save(Path(spec.output_dir))
        report["model_dir"] = spec.output_dir
    return report


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description="Fit a world's judge and measure it.")


if __name__ == "__main__":
    raise SystemExit(main())
