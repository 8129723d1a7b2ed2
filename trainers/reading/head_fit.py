"""A logistic head fitted in torch on the features' own device, its L2 strength chosen by
cross-validation grouped by call: every fold of one strength in one batched Newton solve,
each strength warm-started from the one before it.

The objective is scikit-learn's `LogisticRegression(C=strength)`: strength × the (weighted)
logistic loss summed over rows, plus half the squared weights, the intercept unpenalised; the
folds are scikit-learn's `GroupKFold(5)` (a group's rows never straddle a fold's training and
validation rows); the score of a strength is the mean over folds of `accuracy` (a row counts
when its logit is on its label's side of 0, as `predict`) or `roc_auc` (ranks, ties count
half), as `cross_val_score`. It replaced scikit-learn's grid for the reward models' probe
(trainers.wording.reward_probe), which ran 30 single-threaded fits on the CPU in every run:
448 s at width 4,096 on two cores, bench.probe_head_fit.

What makes it fast:
- Newton's method (IRLS) in float64 with a backtracking line search (trainers.stats.
  logistic_batched) converges in a handful of steps, and a warm start from the previous
  strength saves half of them.
- Where a fold has fewer training rows than features (the probe's 920 pairs against a 4,096-wide
  base), its optimum lies in the span of its training rows (the loss's gradient is a mix of
  them, and the penalty pulls nothing else in), so the fold is fitted on the rows'
  coordinates in an orthonormal basis of that span (a QR of its rows): a rows × rows problem
  in place of features × features, with the same minimum and the same logits.
- Bradley–Terry rows come as both orders of each pair (x labelled 1, −x labelled 0, one
  group): without an intercept they are one row counted twice, so they are fitted as one row
  of weight 2 (the same objective, the same accuracy, half the rows and half the rank).

A strength whose folds' validation rows hold one class only has no AUC on those folds; they
are left out of its mean (scikit-learn makes the whole strength nan there).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.stats.auc import auc
from trainers.stats.logistic_batched import newton

# The L2 strength of each head (scikit-learn's C) is chosen by 5-fold cross-validation on the
# training part alone, grouped like the held-out split, from this grid; the held-out part is
# never looked at. Below a few dozen rows the library default is used.
REGULARISATION_GRID = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
REGULARISATION_DEFAULT = 1.0
MIN_ROWS_TO_CHOOSE = 60

FOLDS = 5
# On the CPU the fit runs on one thread: its many small products spent most of their time
# waiting for a second one (pairs at width 1,024 on two busy cores: 21 s on two threads,
# 8 s on one), as numpy's BLAS threads did beside torch's before it (reward_probe._dense_fit).
CPU_THREADS = 1


@dataclass(frozen=True)
class GroupedFit:
    """The strength chosen, the head fitted at it on every row given (weights in the rows'
    feature order; None when only the strength was asked for), and the mean cross-validated
    score of each strength tried (empty when the grid held one strength)."""

    strength: float
    weights: np.ndarray | None
    bias: float
    scores: dict[float, float]
    device: str


def fit_by_group(
    rows: Any,
    labels: Sequence[float] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    *,
    grid: Sequence[float],
    fit_intercept: bool,
    scoring: str,
    deadline: float | None = None,
    device: Any = None,
    final: bool = True,
) -> GroupedFit:
    """Choose the strength of `grid` (strongest first) that cross-validates best by group on
    these rows, and fit the head at it on all of them. Runs on `device` (default: where `rows`
    are: a torch tensor's device, the CPU for numpy). Once `deadline` (time.monotonic())
    passes no weaker strength is tried, and the best of those tried is chosen."""
    import torch

    if scoring not in ("accuracy", "roc_auc"):
        raise ValueError(f"scoring must be 'accuracy' or 'roc_auc', not {scoring!r}")
    device = torch.device(device) if device is not None else _device_of(rows)
    features = torch.as_tensor(rows, dtype=torch.float64).to(device)
    targets = torch.as_tensor(np.asarray(labels, dtype=np.float64)).to(device)
    weight = torch.ones_like(targets)
    folds = _group_folds(np.asarray(groups)) if len(grid) > 1 else None
    if not fit_intercept and scoring == "accuracy":
        features, targets, weight, folds = _fold_mirrored_rows(features, targets, weight, folds)
    scores: dict[float, float] = {}
    strength = float(grid[0])
    with _threads(device):
        if folds is not None:
            scores = _cross_validate(
                features, targets, weight, folds, grid, fit_intercept, scoring, deadline
            )
            strength = _best(scores)
        if not final:
            return GroupedFit(strength, None, 0.0, scores, str(device))
        coefficients, bias = _fit_all(features, targets, weight, strength, fit_intercept)
    return GroupedFit(strength, coefficients, bias, scores, str(device))


@contextmanager
def _threads(device: Any) -> Iterator[None]:
    """On the CPU, torch on CPU_THREADS threads for the fit, then as it was."""
    import torch

    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _best(scores: dict[float, float]) -> float:
    """The strongest strength (the first tried) among those that score best: two means of
    the same rows right can differ in their last bit, and scikit-learn's argmax then chose
    by rounding (pairs at width 1,024: C=10 over C=0.1 on 497 of 920 rows right each)."""
    best = max(scores.values())
    return next(strength for strength, score in scores.items() if score >= best - 1e-9)


def _device_of(rows: Any) -> Any:
    import torch

    return rows.device if isinstance(rows, torch.Tensor) else torch.device("cpu")


def _group_folds(groups: np.ndarray) -> np.ndarray:
    """Each row's validation fold: scikit-learn's GroupKFold, so both choose from the same
    folds, and a group's rows always share one."""
    from sklearn.model_selection import GroupKFold

    fold_of = np.empty(len(groups), dtype=np.int64)
    for fold, (_train, validation) in enumerate(
        GroupKFold(n_splits=FOLDS).split(np.zeros(len(groups)), groups=groups)
    ):
        fold_of[validation] = fold
    return fold_of


def _fold_mirrored_rows(features, targets, weight, folds):
    """Rows whose second half is the first half negated, with the other label, in the same
    fold (Bradley–Terry's two orders): the first half, each row weighing 2."""
    import torch

    half = features.shape[0] // 2
    if half == 0 or features.shape[0] % 2:
        return features, targets, weight, folds
    mirrored = (
        torch.equal(features[half:], -features[:half])
        and torch.equal(targets[half:], 1.0 - targets[:half])
        and (folds is None or np.array_equal(folds[half:], folds[:half]))
    )
    if not mirrored:
        return features, targets, weight, folds
    return (
        features[:half],
        targets[:half],
        2.0 * weight[:half],
        None if folds is None else folds[:half],
    )


# --- the design each fit runs on -------------------------------------------------------------


def _design(training):
    """(training rows in the fit's coordinates, the basis back to the features or None): the
    rows' own coordinates in an orthonormal basis of their span when they are fewer than the
    features, else the features themselves. The basis comes from a Cholesky factor of the
    rows' Gram matrix (rows = L Q with Q orthonormal: a tenth of a QR's time on the CPU), or
    from a QR where rows repeat or nearly do and that factor is not to be trusted."""
    import torch

    if training.shape[1] <= training.shape[0]:
        return training, None
    gram = training @ training.T
    lower, info = torch.linalg.cholesky_ex(gram)
    pivots = lower.diagonal() ** 2
    if int(info) == 0 and float(pivots.min()) > 1e-8 * float(pivots.max()):
        basis = torch.linalg.solve_triangular(lower, training, upper=False).T
        return lower, basis
    basis, upper = torch.linalg.qr(training.T)  # training.T = basis @ upper
    return upper.T, basis


def _with_intercept(design, fit_intercept: bool):
    import torch

    if not fit_intercept:
        return design
    ones = torch.ones((*design.shape[:-1], 1), dtype=design.dtype, device=design.device)
    return torch.cat([design, ones], dim=-1)


def _stacked_folds(features, targets, weight, folds, fit_intercept):
    """Every fold's training and validation rows, padded into one batch: rows that pad a
    fold weigh 0 and columns that pad its basis are 0 (their coefficients stay 0)."""
    import torch

    def padded(parts, rows: int, columns: int):
        out = features.new_zeros((len(parts), rows, columns)) if columns else None
        flat = features.new_zeros((len(parts), rows))
        for index, part in enumerate(parts):
            if columns:
                out[index, : part.shape[0], : part.shape[1]] = part
            else:
                flat[index, : part.shape[0]] = part
        return out if columns else flat

    train_designs, validation_designs, train_parts, validation_parts = [], [], [], []
    for fold in range(FOLDS):
        in_fold = torch.as_tensor(folds == fold, device=features.device)
        design, basis = _design(features[~in_fold])
        train_designs.append(design)
        validation = features[in_fold]
        validation_designs.append(validation if basis is None else validation @ basis)
        train_parts.append((targets[~in_fold], weight[~in_fold]))
        validation_parts.append(targets[in_fold])
    rows = max(design.shape[0] for design in train_designs)
    width = max(design.shape[1] for design in train_designs)
    held = max(part.shape[0] for part in validation_parts)
    return {
        "design": _with_intercept(padded(train_designs, rows, width), fit_intercept),
        "targets": padded([part[0] for part in train_parts], rows, 0),
        "weight": padded([part[1] for part in train_parts], rows, 0),
        "validation": _with_intercept(padded(validation_designs, held, width), fit_intercept),
        "validation_targets": padded(validation_parts, held, 0),
        "validation_mask": padded([torch.ones_like(p) for p in validation_parts], held, 0),
    }


# --- cross-validation and the final fit ------------------------------------------------------


def _cross_validate(features, targets, weight, folds, grid, fit_intercept, scoring, deadline):
    stack = _stacked_folds(features, targets, weight, folds, fit_intercept)
    coefficients = features.new_zeros((FOLDS, stack["design"].shape[-1]))
    scores: dict[float, float] = {}
    for strength in grid:
        if scores and deadline is not None and time.monotonic() > deadline:
            break
        coefficients = newton(
            stack["design"],
            stack["targets"],
            stack["weight"],
            float(strength),
            coefficients,
            fit_intercept=fit_intercept,
        )
        logits = (stack["validation"] @ coefficients.unsqueeze(-1)).squeeze(-1)
        scores[float(strength)] = _score(
            logits, stack["validation_targets"], stack["validation_mask"], scoring
        )
    return scores


def _score(logits, targets, mask, scoring: str) -> float:
    if scoring == "accuracy":
        right = ((logits > 0) == (targets > 0.5)).to(logits.dtype) * mask
        return float((right.sum(-1) / mask.sum(-1)).mean())
    by_fold = [
        auc(
            logits[fold][mask[fold] > 0].double().cpu().numpy(),
            (targets[fold][mask[fold] > 0] > 0.5).cpu().numpy(),
        )
        for fold in range(logits.shape[0])
    ]
    defined = [value for value in by_fold if value is not None]
    return float(np.mean(defined)) if defined else float("nan")


def _fit_all(features, targets, weight, strength: float, fit_intercept: bool):
    design, basis = _design(features)
    coefficients = newton(
        _with_intercept(design, fit_intercept).unsqueeze(0),
        targets.unsqueeze(0),
        weight.unsqueeze(0),
        strength,
        features.new_zeros((1, design.shape[1] + int(fit_intercept))),
        fit_intercept=fit_intercept,
    )[0]
    head = coefficients[: design.shape[1]]
    if basis is not None:
        head = basis @ head
    bias = float(coefficients[-1]) if fit_intercept else 0.0
    return head.cpu().numpy(), bias


def regularisation_grid(rows: Any, labels: np.ndarray, groups: np.ndarray) -> tuple[float, ...]:
    """The strengths a head's fit chooses from: the library default alone for too few rows,
    groups or labels to cross-validate."""
    distinct = len(set(np.asarray(groups).tolist()))
    labels = np.asarray(labels)
    if rows.shape[0] < MIN_ROWS_TO_CHOOSE or distinct < 5 or len(set(labels.tolist())) < 2:
        return (REGULARISATION_DEFAULT,)
    return REGULARISATION_GRID


def feature_spread(rows: np.ndarray) -> np.ndarray:
    """Per-feature spread, so one strength suits every feature (the head's weights are divided
    by it afterwards); a feature that never varies keeps 1."""
    spread = rows.std(axis=0)
    spread[spread < 1e-6] = 1.0
    return spread
