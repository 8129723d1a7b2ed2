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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from trainers.judge.answers import answers_floor
from trainers.judge.learned import WORDS, LearnedPart, fit_total, fit_won
from trainers.reading.head_fit import (  # noqa: F401 (the grid is read from here too)
    MIN_ROWS_TO_CHOOSE,
    REGULARISATION_DEFAULT,
    REGULARISATION_GRID,
    regularisation_grid,
)
from trainers.runtime import Progress, trainer_main
from trainers.stats.auc import auc
from trainers.stats.intervals import at_chance, bootstrap_interval
from trainers.stats.logistic import logistic_fit, logistic_model, sigmoid

# The fewest held-out items (picks, or calls for an outcome AUC) a measure needs before it
# counts (trainers.judge.standing shows and judges by the same number).
MIN_HELD_OUT_ITEMS = 30

# --- the features -------------------------------------------------------------------------

# Far more words than a world's picks can teach would only add noise to a linear fit.
MAX_VOCABULARY = 40_000
# A dimension head needs this many picks with its reason ticked; below it the rubric answers.
MIN_DIMENSION_PAIRS = 30
# How much of the data is held out (by group).
HELD_OUT_FRACTION = 0.2
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
    strength: float = 1.0  # the L2 strength its fit chose (a refit on a fold reuses it)

    def logits(self, features: sparse.csr_matrix) -> np.ndarray:
        return np.asarray(features @ self.weights).ravel() + self.bias

    def scores(self, features: sparse.csr_matrix) -> np.ndarray:
        return sigmoid(self.logits(features))


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
        from trainers.reading.head_fit import fit_by_group

        setting = {"fit_intercept": fit_intercept, "scoring": scoring, "deadline": deadline}
        return fit_by_group(rows, labels, groups, grid=grid, final=False, **setting).strength
    from sklearn.model_selection import GroupKFold, cross_val_score

    scores = []
    for strength in grid:
        if scores and deadline is not None and time.monotonic() > deadline:
            break
        model = logistic_model(strength=strength, fit_intercept=fit_intercept, solver=solver)
        folds = GroupKFold(n_splits=5)
        score = cross_val_score(model, rows, labels, groups=groups, cv=folds, scoring=scoring)
        scores.append(float(np.mean(score)))
    return grid[int(np.argmax(scores))]


def fit_preference_head(
    chosen: sparse.csr_matrix | None,
    rejected: sparse.csr_matrix | None,
    absolute: sparse.csr_matrix | None,
    absolute_targets: np.ndarray | None,
    *,
    size: int,
    seed: int,
    strength: float | None = None,
) -> Head | None:
    """Bradley–Terry on pick differences plus overrides as absolute rows (a soft label, with
    a bias column only they use), in one logistic fit. None without any data. A `strength`
    given is used as it is (no cross-validation)."""
    blocks, labels, weights = [], [], []
    chosen_strength = strength
    if chosen is not None and chosen.shape[0]:
        difference = chosen - rejected
        zero = sparse.csr_matrix((difference.shape[0], 1))
        # Both orders, so the fit has no side to prefer and needs no intercept.
        blocks += [sparse.hstack([difference, zero]), sparse.hstack([-difference, zero])]
        labels += [np.ones(difference.shape[0]), np.zeros(difference.shape[0])]
        weights += [np.ones(difference.shape[0])] * 2
        # A pair's two orders share a group, so no fold sees one order and tests the other.
        pair_ids = np.arange(difference.shape[0])
        if chosen_strength is None:
            chosen_strength = regularisation_by_group(
                sparse.vstack(blocks).tocsr(),
                np.concatenate(labels),
                np.concatenate([pair_ids, pair_ids]),
                fit_intercept=False,
                scoring="accuracy",
            )
    strength = REGULARISATION_DEFAULT if chosen_strength is None else chosen_strength
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
    coefficients = logistic_fit(
        sparse.vstack(blocks).tocsr(),
        label_vector,
        strength=strength,
        fit_intercept=False,
        sample_weight=np.concatenate(weights),
    ).weights
    head = Head(weights=coefficients[:size], bias=float(coefficients[size]), strength=strength)
    if (absolute is None or not absolute.shape[0]) and chosen is not None and chosen.shape[0]:
        # Picks alone rank replies but anchor no level: their logits can sit anywhere, and in
        # the demo every reply scored 0.99999+ (shown as 1.0 everywhere). Centred on the
        # picked replies, a typical one scores 0.5; the ranking, and every verdict, is unchanged.
        head.bias = -float(np.median(head.logits(sparse.vstack([chosen, rejected]).tocsr())))
    return head


def fit_outcome_head(
    features: sparse.csr_matrix,
    won: np.ndarray,
    calls: np.ndarray,
    *,
    strength: float | None = None,
) -> Head | None:
    if features.shape[0] < 4 or len(set(won.tolist())) < 2:
        return None
    if strength is None:
        strength = regularisation_by_group(
            features, won, calls, fit_intercept=True, scoring="roc_auc"
        )
    fitted = logistic_fit(features, won, strength=strength)
    return Head(weights=fitted.weights, bias=fitted.bias, strength=strength)


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

    bounds = bootstrap_interval(outcomes, accuracy, seed=seed)
    return {
        "pairs": int(n),
        "accuracy": round(float(agree.mean()), 4),
        "accuracy_ci": bounds,
        "ties": int(ties.sum()),
        "kappa": None if kappa is None else round(kappa, 4),
        "at_chance": None if bounds is None else at_chance(bounds),
    }


def _kappa(reviewer: np.ndarray, judge: np.ndarray) -> float | None:
    if len(reviewer) == 0:
        return None
    observed = float(np.mean(reviewer == judge))
    p_reviewer, p_judge = float(np.mean(reviewer)), float(np.mean(judge))
    expected = p_reviewer * p_judge + (1 - p_reviewer) * (1 - p_judge)
    return 0.0 if expected >= 1 else (observed - expected) / (1 - expected)


def outcome_agreement(
    call_scores: np.ndarray, call_won: np.ndarray, *, seed: int
) -> dict[str, Any]:
    """AUC of a per-call score (mean over the call's opening turns) against the real outcome,
    with a bootstrap interval over calls."""
    value = auc(call_scores, call_won)
    paired = np.column_stack([call_scores, call_won.astype(float)])

    def statistic(sample: np.ndarray) -> float | None:
        return auc(sample[:, 0], sample[:, 1] > 0.5)

    interval = bootstrap_interval(paired, statistic, seed=seed) if value is not None else None
    return {
        "calls": int(len(call_scores)),
        "won": int(call_won.sum()),
        "auc": None if value is None else round(value, 4),
        "auc_ci": interval,
        "at_chance": None if interval is None else at_chance(interval),
    }


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
    # The base's heads (trainers.judge.learned); None for a judge of words alone.
    learned: LearnedPart | None = None
    # A world with outcomes and no picks: whether its won head scores the total (it beat
    # chance on held-out calls: `won_scores_total`), else the rubric's total does.
    won_is_total: bool = True

    def base_needed(self) -> str | None:
        """The base scoring reads with: for the scorer the fit chose, or for the world's check
        that a reply answers its call (trainers.judge.answers); None when the words alone were
        kept and there is no check (or there is no base part)."""
        learned = self.learned
        if learned is None:
            return None
        return (
            learned.base if learned.heads_read_base() or learned.answers_floor is not None else None
        )

    def score(
        self,
        contexts: Sequence[Sequence[Mapping[str, str]]],
        replies: Sequence[str],
        rubric: Sequence[Sequence[float]],
        *,
        digits: int | None = 4,
        base_features: np.ndarray | None = None,
    ) -> list[dict[str, Any]]:
        """Scores for each (context, reply): {"scores": {dim: 0..1}, "total", "won_probability"}.
        `rubric` holds the rubric's numbers for each: its seven dimensions, then its total.
        `base_features` are the base's features of each (trainers.reading.base_features); without
        them the words' heads alone score, as on a machine without the base.
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
        learned = self.learned if base_features is not None else None
        if learned is not None and learned.total is not None and self.total is not None:
            totals = sigmoid(learned.total.logits(self.total.logits(features), base_features))
        if learned is not None and learned.won is not None and self.won is not None:
            won = sigmoid(learned.won.logits(self.won.logits(features), base_features))
        if self.total is None and won is not None and self.won_is_total:
            # A world that has outcomes and no picks yet, whose won head beat chance on held-out
            # calls: which replies win calls is what it learned, so that is its total (a
            # verdict then rests on the head whose AUC the world's standing shows).
            totals = won
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
        if self.learned is not None:
            arrays.update(self.learned.arrays())
        np.savez(folder / "judge.npz", **arrays)
        (folder / "judge.json").write_text(
            json.dumps(
                {
                    "dimensions": self.dimensions,
                    "vocabulary": self.featurizer.vocabulary,
                    "extra_size": self.featurizer.extra_size,
                    "biases": biases,
                    "meta": self.meta,
                    "learned": self.learned.described() if self.learned else None,
                    "won_is_total": self.won_is_total,
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
            learned=LearnedPart.from_saved(described.get("learned"), loaded),
            # Versions fitted before the rule scored the total by their won head.
            won_is_total=bool(described.get("won_is_total", True)),
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
    # The base that reads every reply (trainers.reading.base_features); "" for words alone.
    base: str = ""
    # More (context, reply) items for the base to read into the cache ({"context", "reply"}):
    # replies the world will score soon after the fit; no head learns from them.
    also_read: list[dict[str, Any]] = field(default_factory=list)
    models_dir: str = ""
    features_dir: str = ""
    device: str = "cpu"

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
            base=str(raw.get("base") or ""),
            also_read=list(raw.get("also_read") or []),
            models_dir=str(raw.get("models_dir") or ""),
            features_dir=str(raw.get("features_dir") or ""),
            device=str(raw.get("device") or "cpu"),
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
    """Fit on the training part; measure the fit and the rubric on the held-out part. Progress
    is in hundredths: reading every reply with the base (where the spec names one) is most of
    the time."""
    started = time.monotonic()

    def step(done: int, **metrics: Any) -> None:
        if progress is not None:
            progress(done, 100, **metrics)

    train_pairs, held_pairs = _split(spec.pairs, spec)
    train_outcomes, held_outcomes = _split(spec.outcomes, spec)
    overrides = spec.overrides  # few and deliberate: all of them teach
    extra_size = len(spec.dimensions) + 1
    featurizer = Featurizer.fit(
        _texts(train_pairs, overrides, train_outcomes), extra_size=extra_size
    )
    step(5, stage="features", vocabulary=len(featurizer.vocabulary))

    words = _WordsFit(featurizer, train_pairs, overrides, spec.seed)
    total, by_dimension = words.preference_heads(spec.dimensions)
    step(10, stage="preference heads", pairs=len(train_pairs), overrides=len(overrides))

    won_head = words.outcome_head(train_outcomes)
    step(15, stage="outcome head", turns=len(train_outcomes))

    reader, unread = _base_reader(spec)
    learned = None
    if reader is not None:
        read, answers = _read_every_reply(reader, spec, step)
        learned = _learned_fit(spec, reader, words, total, won_head, train_outcomes)
        learned.features = read  # what reading them cost, for the report
        learned.answers_floor, learned.answers_sample = answers_floor(answers), len(answers)
        if learned.answers_floor is not None:
            learned.answers_own = np.sort(np.asarray(answers, dtype=np.float64))
    step(90, stage="base heads", base=spec.base or None)

    model = FittedJudgeModel(spec.dimensions, featurizer, total, by_dimension, won_head)
    model.learned = learned
    report = measure(model, held_pairs, held_outcomes, seed=spec.seed, reader=reader)
    model.won_is_total = won_scores_total(report)
    report["trained_on"] = {
        "pairs": len(train_pairs),
        "overrides": len(overrides),
        "outcome_turns": len(train_outcomes),
        "outcome_calls": len({str(row["group"]) for row in train_outcomes}),
        "dimension_heads": sorted(name for name, head in by_dimension.items() if head),
    }
    report["scorer"] = _scorer_report(learned, picks=total is not None, won=model.won_is_total)
    if unread:
        report["scorer"]["base_missing"] = unread
    report["fit_seconds"] = round(time.monotonic() - started, 2)
    model.meta = {"trained_on": report["trained_on"], "seed": spec.seed}
    step(100, stage="measured")
    return model, report


def _read_every_reply(
    reader: Any, spec: JudgeFitSpec, step: Callable
) -> tuple[dict[str, Any], np.ndarray]:
    """Every reply of the spec (training and held out) read by the base once, into the cache
    the heads and the measure then read from, and how well the world's own turns the guard
    samples (`also_read`) answer their calls (trainers.judge.answers; that pass stores their
    features too); the progress moves from 15 to 85 meanwhile."""
    from trainers.reading.base_features import ReadStats

    stats = ReadStats()
    # A turn with nothing before it answers nothing (its score is 0 by construction): the
    # floor is placed on the turns that follow something said.
    own = [(row["context"], row["reply"]) for row in spec.also_read if row["context"]]
    answers = np.zeros(0)
    if own:
        step(15, stage="reading the world's own turns with the base", of=len(own))
        answers = reader.answers(own, stats=stats)
    items = [(row["context"], row[side]) for row in spec.pairs for side in ("chosen", "rejected")]
    items += [(row["context"], row["reply"]) for row in [*spec.outcomes, *spec.also_read]]

    def moved(done: int, of: int) -> None:
        step(
            15 + int(70 * done / max(of, 1)),
            stage="reading replies with the base",
            read=done,
            of=of,
        )

    reader.features(items, on_progress=moved, stats=stats)
    return stats.as_dict(), answers


class _WordsFit:
    """The words' heads (TF-IDF features) over the training part, and their refits on part of
    it that the learned scorer's choice reads (trainers.judge.learned)."""

    def __init__(self, featurizer: Featurizer, pairs: list, overrides: list, seed: int):
        self.featurizer, self.pairs, self.overrides, self.seed = featurizer, pairs, overrides, seed
        self.chosen, self.rejected = _pair_features(featurizer, pairs) if pairs else (None, None)
        self.absolute = _override_features(featurizer, overrides)
        self.override_totals = (
            np.asarray([float(row["total"]) for row in overrides]) if overrides else None
        )
        self.outcome_features = None
        self.won = self.calls = None

    def preference_heads(self, dimensions: list[str]) -> tuple[Head | None, dict]:
        size, chosen, rejected = self.featurizer.size, self.chosen, self.rejected
        total = fit_preference_head(
            chosen, rejected, self.absolute, self.override_totals, size=size, seed=self.seed
        )
        by_dimension: dict[str, Head | None] = {}
        for name in dimensions:
            ticked = [i for i, row in enumerate(self.pairs) if name in (row.get("reasons") or [])]
            scored = [
                i for i, row in enumerate(self.overrides) if name in (row.get("scores") or {})
            ]
            if len(ticked) < MIN_DIMENSION_PAIRS and not scored:
                by_dimension[name] = None
                continue
            enough = len(ticked) >= MIN_DIMENSION_PAIRS
            by_dimension[name] = fit_preference_head(
                chosen[ticked] if enough else None,
                rejected[ticked] if enough else None,
                self.absolute[scored] if scored else None,
                np.asarray([float(self.overrides[i]["scores"][name]) for i in scored])
                if scored
                else None,
                size=size,
                seed=self.seed,
            )
        return total, by_dimension

    def outcome_head(self, outcomes: list[dict[str, Any]]) -> Head | None:
        if not outcomes:
            return None
        self.outcome_features = self.featurizer.transform(
            [row["context"] for row in outcomes],
            [row["reply"] for row in outcomes],
            [row["rubric"] for row in outcomes],
        )
        self.won = np.asarray([bool(row["won"]) for row in outcomes])
        self.calls = np.asarray([str(row["group"]) for row in outcomes])
        return fit_outcome_head(self.outcome_features, self.won, self.calls)

    def pair_margins(self, total: Head):
        """(training pairs, held pairs) -> the held pairs' chosen-minus-rejected words logits
        from the total's fit on the training pairs (and every override), at its strength."""

        def margins(train: np.ndarray, held: np.ndarray) -> np.ndarray:
            head = fit_preference_head(
                self.chosen[train],
                self.rejected[train],
                self.absolute,
                self.override_totals,
                size=self.featurizer.size,
                seed=self.seed,
                strength=total.strength,
            )
            return head.logits(self.chosen[held]) - head.logits(self.rejected[held])

        return margins

    def won_logits(self, won_head: Head):
        def logits(train: np.ndarray, held: np.ndarray) -> np.ndarray:
            head = fit_outcome_head(
                self.outcome_features[train],
                self.won[train],
                self.calls[train],
                strength=won_head.strength,
            )
            return head.logits(self.outcome_features[held]) if head else np.zeros(len(held))

        return logits


def _base_reader(spec: JudgeFitSpec) -> tuple[Any, str]:
    """The reader of the spec's base, or (None, why) when the spec names none or the base is
    not on this machine: the fit then learns from the words alone and says so, rather than
    leaving the world with no judge version at all (nothing is downloaded at run time)."""
    if not spec.base:
        return None, ""
    from trainers.bases import BaseNotFoundError, resolve_base
    from trainers.reading.base_features import BaseReader

    try:
        resolve_base(spec.base, models_dir=spec.models_dir)
    except (BaseNotFoundError, ValueError) as error:
        return None, str(error)
    reader = BaseReader(
        spec.base, models_dir=spec.models_dir, features_dir=spec.features_dir, device=spec.device
    )
    return reader, ""


def _learned_fit(
    spec: JudgeFitSpec,
    reader: Any,
    words: _WordsFit,
    total: Head | None,
    won_head: Head | None,
    outcomes: list[dict[str, Any]],
) -> LearnedPart:
    """The base's heads beside the words' (trainers.judge.learned), on the training part; every
    reply's features are in the cache by now (_read_every_reply)."""
    pairs, grid = words.pairs, REGULARISATION_GRID
    learned_total = learned_won = None
    if pairs and total is not None and words.chosen is not None:
        chosen = reader.features([(r["context"], r["chosen"]) for r in pairs])
        rejected = reader.features([(r["context"], r["rejected"]) for r in pairs])
        learned_total = fit_total(
            chosen,
            rejected,
            [str(r.get("group") or i) for i, r in enumerate(pairs)],
            words.pair_margins(total),
            keep_words=bool(words.overrides),
            grid=grid,
            seed=spec.seed,
        )
        if learned_total is not None and learned_total.kind != WORDS:
            # Centred on the picked replies, as the words' total is (fit_preference_head).
            sides = np.vstack([chosen, rejected])
            words_sides = total.logits(sparse.vstack([words.chosen, words.rejected]).tocsr())
            learned_total.mix[2] -= float(np.median(learned_total.logits(words_sides, sides)))
    if outcomes and won_head is not None:
        features = reader.features([(r["context"], r["reply"]) for r in outcomes])
        learned_won = fit_won(
            features,
            words.won,
            [str(r["group"]) for r in outcomes],
            words.won_logits(won_head),
            grid=grid,
            seed=spec.seed,
        )
    return LearnedPart(spec.base, learned_total, learned_won)


def won_scores_total(report: Mapping[str, Any]) -> bool:
    """Whether a world's won head may score its total where it has no picks: only once it beat
    chance on at least MIN_HELD_OUT_ITEMS held-out calls. A head at chance (or unmeasured)
    ranks replies by noise; the rubric's total then ranks them, and the world's verdicts say
    "no verdict" either way (trainers.judge.standing)."""
    measured = (report.get("outcomes") or {}).get("fitted") or {}
    enough = int(measured.get("calls") or 0) >= MIN_HELD_OUT_ITEMS
    return enough and measured.get("at_chance") is False


def _scorer_report(learned: LearnedPart | None, *, picks: bool, won: bool) -> dict[str, Any]:
    """Which scorer the fit kept for the total and for won, and why (trainers.judge.learned);
    where the world has no picks, "total" is "won" when its won head scores the total and
    "rubric" when that head did not beat chance on held-out calls."""
    kinds = learned.kinds() if learned is not None else {"total": None, "won": None}
    kept = {name: kind or WORDS for name, kind in kinds.items()}
    if not picks:
        kept["total"] = "won" if won else "rubric"
    if learned is None:
        return {"base": None, **kept}
    described = learned.described()
    return {
        "base": learned.base,
        **kept,
        "chosen_by": {name: (described[name] or {}).get("chosen_by") for name in ("total", "won")},
        "features": learned.features,
        "answers": described["answers"],
    }


def measure(
    model: FittedJudgeModel,
    pairs: list[dict[str, Any]],
    outcomes: list[dict[str, Any]],
    *,
    seed: int,
    reader: Any = None,
) -> dict[str, Any]:
    """The fitted judge's and the rubric's agreement on rows neither was fitted on; where the
    judge reads replies with a base (`reader`), its words alone and the base alone beside it."""
    report: dict[str, Any] = {"held_out": {"pairs": len(pairs), "outcome_turns": len(outcomes)}}
    learned = model.learned if reader is not None else None
    if pairs:
        report["pairs"], report["dimensions"] = _pairs_measured(model, pairs, seed, learned, reader)
    if outcomes and model.won is not None:
        report["outcomes"] = _outcomes_measured(model, outcomes, seed, learned, reader)
    return report


def _pairs_measured(model, pairs, seed, learned, reader) -> tuple[dict, dict]:
    contexts = [row["context"] for row in pairs]
    sides = {}
    for side in ("chosen", "rejected"):
        replies = [row[side] for row in pairs]
        features = (
            reader.features(list(zip(contexts, replies, strict=True)))
            if learned is not None
            else None
        )
        rubric = [row[f"rubric_{side}"] for row in pairs]
        sides[side] = {
            "fitted": model.score(contexts, replies, rubric, digits=None, base_features=features),
            "words": model.score(contexts, replies, rubric, digits=None) if learned else None,
            "features": features,
        }
    chosen, rejected = sides["chosen"]["fitted"], sides["rejected"]["fitted"]
    measured = {
        "fitted": pair_agreement(_totals(chosen), _totals(rejected), seed=seed),
        "rubric": pair_agreement(
            np.asarray([r["rubric_chosen"][-1] for r in pairs]),
            np.asarray([r["rubric_rejected"][-1] for r in pairs]),
            seed=seed,
        ),
    }
    if learned is not None and learned.total is not None:
        measured["words"] = pair_agreement(
            _totals(sides["chosen"]["words"]), _totals(sides["rejected"]["words"]), seed=seed
        )
        weights = learned.total.weights
        measured["base"] = pair_agreement(
            sides["chosen"]["features"] @ weights,
            sides["rejected"]["features"] @ weights,
            seed=seed,
        )
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
    return measured, per_dimension


def _totals(scored: list[dict[str, Any]]) -> np.ndarray:
    return np.asarray([item["total"] for item in scored])


def _outcomes_measured(model, outcomes, seed, learned, reader) -> dict[str, Any]:
    contexts = [row["context"] for row in outcomes]
    replies = [row["reply"] for row in outcomes]
    rubric = [row["rubric"] for row in outcomes]
    features = (
        reader.features(list(zip(contexts, replies, strict=True))) if learned is not None else None
    )
    scored = model.score(contexts, replies, rubric, digits=None, base_features=features)
    won_turns = np.asarray([s["won_probability"] for s in scored])
    fitted_calls, won_calls = per_call_scores(outcomes, won_turns)
    rubric_calls, _ = per_call_scores(outcomes, np.asarray([row["rubric"][-1] for row in outcomes]))
    measured = {
        "fitted": outcome_agreement(fitted_calls, won_calls, seed=seed),
        "rubric": outcome_agreement(rubric_calls, won_calls, seed=seed),
        "reliability": reliability(fitted_calls, won_calls),
    }
    if learned is not None and learned.won is not None:
        words = model.score(contexts, replies, rubric, digits=None)
        words_calls, _ = per_call_scores(
            outcomes, np.asarray([s["won_probability"] for s in words])
        )
        measured["words"] = outcome_agreement(words_calls, won_calls, seed=seed)
        # Mean logit of a call's turns: a ranking, which is all an AUC reads.
        base_calls, _ = per_call_scores(outcomes, features.astype(np.float64) @ learned.won.weights)
        measured["base"] = outcome_agreement(base_calls, won_calls, seed=seed)
    return measured


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
