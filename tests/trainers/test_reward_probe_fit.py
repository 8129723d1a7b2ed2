"""The probe's head fit: bounded by the stage's deadline, the head and strength scikit-learn
finds, and never fitted on a held-out pair."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_info

from tests.trainers.test_wording import models_dir  # noqa: F401 (the tiny base, a fixture)
from trainers.judge.fit import REGULARISATION_GRID, regularisation_by_group
from trainers.wording.reward_probe import _dense_fit, _scale, fit_outcome_probe, fit_pair_probe


def _outcome_rows(count: int, *, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(count, 24)).astype(np.float32)
    won = (features[:, 0] + 0.5 * rng.normal(size=count)) > 0
    groups = np.asarray([f"call-{index // 4}" for index in range(count)])
    return features, won, groups


def test_a_passed_deadline_stops_the_grid_after_its_first_strength(monkeypatch):
    from trainers.reading import head_fit

    features, won, groups = _outcome_rows(400, seed=0)
    strengths: list[float] = []
    solve = head_fit.newton

    def counting(*args, **kwargs):
        strengths.append(args[3])
        return solve(*args, **kwargs)

    monkeypatch.setattr(head_fit, "newton", counting)
    labels = won.astype(float)
    chosen = regularisation_by_group(
        features, labels, groups, fit_intercept=True, scoring="roc_auc", deadline=0.0
    )
    assert strengths == [REGULARISATION_GRID[0]]  # the five folds of the strongest, at once
    assert chosen == REGULARISATION_GRID[0]
    strengths.clear()
    regularisation_by_group(features, labels, groups, fit_intercept=True, scoring="roc_auc")
    assert strengths == list(REGULARISATION_GRID)


def test_sparse_rows_keep_scikit_learns_grid(monkeypatch):
    """The fitted judge's TF-IDF rows: the same deadline, scikit-learn's fits."""
    import sklearn.linear_model
    from scipy import sparse

    features, won, groups = _outcome_rows(400, seed=0)
    tried: list[float] = []

    class Counting(LogisticRegression):
        def fit(self, *args, **kwargs):
            tried.append(self.C)
            return super().fit(*args, **kwargs)

    monkeypatch.setattr(sklearn.linear_model, "LogisticRegression", Counting)
    rows, labels = sparse.csr_matrix(features), won.astype(float)
    chosen = regularisation_by_group(
        rows, labels, groups, fit_intercept=True, scoring="roc_auc", deadline=0.0
    )
    assert set(tried) == {REGULARISATION_GRID[0]}
    assert chosen == REGULARISATION_GRID[0]


def test_the_outcome_probe_finds_the_head_scikit_learn_finds():
    features, won, groups = _outcome_rows(600, seed=1)
    weights, strength = fit_outcome_probe(features, won, groups)
    rows = features.astype(np.float64) / _scale(features.astype(np.float64))
    expected_strength = regularisation_by_scikit_learn(rows, won.astype(float), groups)
    reference = LogisticRegression(C=strength, max_iter=5000).fit(rows, won.astype(float))
    expected = reference.coef_.ravel() / _scale(features.astype(np.float64))
    cosine = weights @ expected / np.linalg.norm(weights) / np.linalg.norm(expected)
    assert strength == expected_strength
    assert cosine > 0.9999
    assert np.argmax(np.abs(weights)) == 0  # the one feature that carries the outcome


def regularisation_by_scikit_learn(rows, labels, groups) -> float:
    return regularisation_by_group(
        rows,
        labels,
        groups,
        fit_intercept=True,
        scoring="roc_auc",
        solver="newton-cholesky",
        batched=False,
    )


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


def test_the_pair_probe_never_reads_held_out_pairs(models_dir, monkeypatch):  # noqa: F811
    """Held-out pairs swapped (chosen for rejected) leave the head as it was, and the head
    fit is handed the training pairs' groups only."""
    import dataclasses

    import torch

    from tests.trainers.test_wording import base_spec, synthetic_pairs, tiny_reward_model
    from trainers.reading import head_fit
    from trainers.wording.reward_model import (
        RewardModelConfig,
        RewardRows,
        bradley_terry,
        probe_head,
    )
    from trainers.wording.spec import held_out_split, pair_groups, parse_wording_spec

    pairs = parse_wording_spec(
        base_spec(models_dir, pairs=synthetic_pairs(80)), trainer="rlhf"
    ).pairs
    groups = pair_groups(pairs)
    train, held = held_out_split(groups, fraction=0.2, seed=0)
    swapped = list(pairs)
    for index in held:
        swapped[index] = dataclasses.replace(
            pairs[index], chosen=pairs[index].rejected, rejected=pairs[index].chosen
        )
    handed: list[set[str]] = []
    fit = head_fit.fit_by_group

    def recording(rows, labels, fit_groups, **kwargs):
        handed.append({str(group) for group in fit_groups})
        return fit(rows, labels, fit_groups, **kwargs)

    monkeypatch.setattr(head_fit, "fit_by_group", recording)
    heads = []
    for rows in (pairs, swapped):
        model, tokenizer = tiny_reward_model(models_dir)
        config = RewardModelConfig()
        conversations = bradley_terry.conversations(tokenizer, rows, config)
        probe_head(
            model,
            tokenizer,
            RewardRows(rows, groups, train, held, conversations),
            loss=bradley_terry,
            config=config,
            budget_seconds=None,
            stage_started=0.0,
        )
        heads.append(model.score.weight.detach().clone())
    assert torch.equal(heads[0], heads[1])
    held_groups = {groups[index] for index in held}
    assert handed
    assert all(seen and not seen & held_groups for seen in handed)
