"""The logistic fits, against scikit-learn's LogisticRegression on the same objective."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from trainers.stats.logistic import (
    bradley_terry_strengths,
    log_loss,
    logistic_descent,
    logistic_fit,
    sigmoid,
)


def test_sigmoid_is_the_logistic_function_and_never_overflows():
    z = np.array([-3.0, 0.0, 2.5])
    assert sigmoid(z) == pytest.approx(1.0 / (1.0 + np.exp(-z)))
    with np.errstate(over="raise"):
        assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]


def test_log_loss_matches_scikit_learn():
    from sklearn.metrics import log_loss as sklearn_log_loss

    labels = np.array([0.0, 1.0, 1.0, 0.0])
    probabilities = np.array([0.2, 0.7, 0.9, 0.4])
    assert log_loss(probabilities, labels) == pytest.approx(sklearn_log_loss(labels, probabilities))


def _rows(seed: int):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(300, 4))
    labels = (rng.random(300) < sigmoid(rows @ np.array([1.5, -1.0, 0.0, 0.5]) + 0.3)) * 1.0
    return rows, labels


def test_bradley_terry_is_scikit_learns_penalised_fit_on_both_orientations():
    rng = np.random.default_rng(2)
    players, l2 = 4, 0.5
    winners, losers = [], []
    for _ in range(200):
        a, b = rng.choice(players, 2, replace=False)
        first_wins = rng.random() < sigmoid(0.7 * (a - b))
        winners.append(a if first_wins else b)
        losers.append(b if first_wins else a)
    winners, losers = np.array(winners), np.array(losers)
    ours = bradley_terry_strengths(winners, losers, players, l2=l2)
    # Each game as a row e_winner - e_loser labelled 1, and its mirror labelled 0: the
    # log-likelihood doubles, so C = 1 / (2 l2) puts the same weight on the penalty.
    design = np.zeros((len(winners), players))
    design[np.arange(len(winners)), winners] = 1.0
    design[np.arange(len(winners)), losers] = -1.0
    model = LogisticRegression(C=1 / (2 * l2), fit_intercept=False, tol=1e-10, max_iter=10_000)
    model.fit(np.vstack([design, -design]), np.r_[np.ones(len(design)), np.zeros(len(design))])
    assert ours == pytest.approx(model.coef_.ravel(), abs=1e-5)
    assert ours.sum() == pytest.approx(0.0, abs=1e-9)


def test_gradient_descent_reaches_scikit_learns_optimum():
    rows, labels = _rows(0)
    l2 = 0.05
    fit = logistic_descent(rows, labels, epochs=5000, learning_rate=1.0, l2=l2, with_bias=True)
    # Mean log loss + l2/2 |w|^2 is scikit-learn's C x summed loss + 1/2 |w|^2 with C = 1/(n l2).
    model = LogisticRegression(C=1 / (len(labels) * l2), tol=1e-10, max_iter=10_000)
    model.fit(rows, labels)
    assert fit.weights == pytest.approx(model.coef_.ravel(), abs=1e-4)
    assert fit.bias == pytest.approx(model.intercept_[0], abs=1e-4)


def test_gradient_descent_reports_every_step_without_moving_the_past():
    rows, labels = _rows(1)
    seen = []
    logistic_descent(
        rows,
        labels,
        epochs=3,
        learning_rate=0.5,
        l2=0.0,
        with_bias=False,
        after_step=lambda epoch, fit: seen.append((epoch, fit)),
    )
    assert [epoch for epoch, _fit in seen] == [1, 2, 3]
    assert seen[0][1].bias == 0.0
    assert not np.array_equal(seen[0][1].weights, seen[2][1].weights)


def test_logistic_fit_is_scikit_learns():
    rows, labels = _rows(2)
    fit = logistic_fit(rows, labels, strength=0.3)
    model = LogisticRegression(C=0.3, max_iter=2000).fit(rows, labels)
    assert fit.weights == pytest.approx(model.coef_.ravel())
    assert fit.bias == pytest.approx(model.intercept_[0])
    assert logistic_fit(rows, labels, strength=0.3, fit_intercept=False).bias == 0.0
