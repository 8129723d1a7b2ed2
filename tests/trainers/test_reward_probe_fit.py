"""The probe's head fit: bounded by the stage's deadline, on one BLAS thread, and the same head
whichever solver finds it."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_info

from trainers.judge.fit import REGULARISATION_GRID, regularisation_by_group
from trainers.wording.reward_probe import _dense_fit, _scale, fit_outcome_probe, fit_pair_probe


def _outcome_rows(count: int, *, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(count, 24)).astype(np.float32)
    won = (features[:, 0] + 0.5 * rng.normal(size=count)) > 0
    groups = np.asarray([f"call-{index // 4}" for index in range(count)])
    return features, won, groups


def test_a_passed_deadline_stops_the_grid_after_its_first_strength(monkeypatch):
    import sklearn.linear_model

    features, won, groups = _outcome_rows(400, seed=0)
    tried: list[float] = []

    class Counting(LogisticRegression):
        def fit(self, *args, **kwargs):
            tried.append(self.C)
            return super().fit(*args, **kwargs)

    monkeypatch.setattr(sklearn.linear_model, "LogisticRegression", Counting)
    labels = won.astype(float)
    chosen = regularisation_by_group(
        features, labels, groups, fit_intercept=True, scoring="roc_auc", deadline=0.0
    )
    assert set(tried) == {REGULARISATION_GRID[0]}  # five folds of the strongest only
    assert chosen == REGULARISATION_GRID[0]
    tried.clear()
    regularisation_by_group(features, labels, groups, fit_intercept=True, scoring="roc_auc")
    assert set(tried) == set(REGULARISATION_GRID)


def test_the_outcome_probe_finds_the_head_lbfgs_finds():
    features, won, groups = _outcome_rows(600, seed=1)
    weights, strength = fit_outcome_probe(features, won, groups)
    rows = features.astype(np.float64) / _scale(features.astype(np.float64))
    reference = LogisticRegression(C=strength, max_iter=5000).fit(rows, won.astype(float))
    expected = reference.coef_.ravel() / _scale(features.astype(np.float64))
    cosine = weights @ expected / np.linalg.norm(weights) / np.linalg.norm(expected)
    assert cosine > 0.9999
    assert np.argmax(np.abs(weights)) == 0  # the one feature that carries the outcome


def test_the_pair_probe_ranks_held_out_pairs_by_the_feature_that_decides():
    rng = np.random.default_rng(2)
    chosen = rng.normal(size=(300, 16))
    rejected = rng.normal(size=(300, 16))
    chosen[:, 3] += 1.5  # the preferred reply is higher on one feature
    weights, _strength = fit_pair_probe(
        chosen[:200], rejected[:200], [f"p{index}" for index in range(200)]
    )
    accuracy = float(np.mean(chosen[200:] @ weights > rejected[200:] @ weights))
    assert accuracy > 0.8


def test_the_fits_run_on_one_blas_thread_and_give_the_threads_back():
    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    with _dense_fit():
        assert set(blas_threads()) == {1}
    assert blas_threads() == before
