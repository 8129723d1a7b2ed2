"""Logistic fits: the Bradley–Terry strengths of players, and P(label) = sigmoid(w . x + b).

Three ways to fit, each written once, because their callers need different things:

- `bradley_terry_strengths`: Newton's method on games (winner, loser) with a small L2 pull
  toward 0 (it converges in a few steps; the leaderboard refits it per bootstrap resample);
- `logistic_descent`: a fixed number of full-batch gradient steps, reporting each step's loss
  (a learning curve the page draws; the number of steps is a knob, so it need not converge);
- `logistic_model`: scikit-learn's `LogisticRegression`, where cross-validation or sparse rows
  need scikit-learn's own estimator.

Pure numpy (scikit-learn imported only where asked for); never imports Django.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def sigmoid(z: Any) -> np.ndarray:
    """1 / (1 + e^-z), never overflowing, and precise in both tails: e^-|z| is computed only
    where it is small. (Through tanh, a value near 0 kept only absolute precision: two
    far-apart negative logits could come out tied.)"""
    logits = np.asarray(z, dtype=float)
    small = np.exp(-np.abs(logits))
    return np.where(logits >= 0, 1.0 / (1.0 + small), small / (1.0 + small))


def log_loss(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """The mean negative log-likelihood of 0/1 labels (probabilities clipped off 0 and 1)."""
    clipped = np.clip(probabilities, 1e-12, 1 - 1e-12)
    return float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))


# --- Bradley–Terry ------------------------------------------------------------------------


def bradley_terry_strengths(
    winners: np.ndarray, losers: np.ndarray, players: int, *, l2: float
) -> np.ndarray:
    """Strengths s with P(i beats j) = sigmoid(s_i - s_j), maximising the log-likelihood of
    the games less l2/2 |s|^2 (the pull keeps an unbeaten player finite and fixes the
    origin), by Newton's method (concave: a few steps); centred on 0."""
    strength = np.zeros(players)
    for _ in range(100):
        p_win = sigmoid(strength[winners] - strength[losers])
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


# --- gradient descent ---------------------------------------------------------------------


@dataclass(frozen=True)
class LinearLogits:
    """logit = rows @ weights + bias."""

    weights: np.ndarray
    bias: float

    def logits(self, rows: np.ndarray) -> np.ndarray:
        return rows @ self.weights + self.bias


def logistic_descent(
    rows: np.ndarray,
    labels: np.ndarray,
    *,
    epochs: int,
    learning_rate: float,
    l2: float,
    with_bias: bool,
    after_step: Callable[[int, LinearLogits], None] | None = None,
) -> LinearLogits:
    """`epochs` full-batch gradient steps on the mean log loss + l2/2 |w|^2 (the bias, when
    fitted, unpenalised), from zero. `after_step(epoch, fit)` sees the fit after each step
    (epochs count from 1), for a learning curve."""
    weights = np.zeros(rows.shape[1])
    bias = 0.0
    for epoch in range(1, epochs + 1):
        error = sigmoid(rows @ weights + bias) - labels
        # A new array each step, so a fit handed to after_step stays as it was.
        weights = weights - learning_rate * (rows.T @ error / len(labels) + l2 * weights)
        if with_bias:
            bias -= learning_rate * float(error.mean())
        if after_step is not None:
            after_step(epoch, LinearLogits(weights, bias))
    return LinearLogits(weights, bias)


# --- scikit-learn -------------------------------------------------------------------------


def logistic_model(
    *, strength: float, fit_intercept: bool = True, max_iter: int = 2000, solver: str = "lbfgs"
) -> Any:
    """scikit-learn's L2 logistic regression (C = strength: strength x the summed, weighted
    log loss + 1/2 |w|^2, the intercept unpenalised), unfitted, for cross-validation too."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(
        C=strength, fit_intercept=fit_intercept, max_iter=max_iter, solver=solver
    )


def logistic_fit(
    rows: Any,
    labels: np.ndarray,
    *,
    strength: float,
    fit_intercept: bool = True,
    sample_weight: np.ndarray | None = None,
    max_iter: int = 2000,
) -> LinearLogits:
    """`logistic_model` fitted on dense or sparse rows: its weights and bias (0 without one)."""
    model = logistic_model(strength=strength, fit_intercept=fit_intercept, max_iter=max_iter)
    model.fit(rows, labels, sample_weight=sample_weight)
    bias = float(model.intercept_[0]) if fit_intercept else 0.0
    return LinearLogits(np.asarray(model.coef_).ravel(), bias)
