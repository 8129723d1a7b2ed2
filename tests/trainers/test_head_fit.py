"""The batched logistic head fit (trainers.reading.head_fit) chooses the strength scikit-learn's
grouped grid chooses and fits the head scikit-learn fits, never splits a group across a fold,
and runs where it is told to.

Tolerances, against scikit-learn converged tightly (tol 1e-10) on the same rows and folds:
each strength's mean score within 1e-6 (no row of a fold changes side), the same strength
chosen, weights within 1e-4 relative (L2), probabilities within 1e-5."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, cross_val_score

from trainers.judge.fit import REGULARISATION_GRID
from trainers.reading import head_fit
from trainers.reading.head_fit import fit_by_group


def _outcome_rows(count: int, width: int, *, seed: int):
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=width) / np.sqrt(width)
    features = rng.normal(size=(count, width))
    won = ((3 * features @ direction + rng.normal(size=count)) > 0).astype(float)
    return features, won, np.arange(count) // 3


def _pair_rows(count: int, width: int, *, seed: int):
    """Both orders of each pair, as the probe builds them: x labelled 1, -x labelled 0."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=width) / np.sqrt(width)
    difference = rng.normal(size=(count, width)) + 0.4 * direction
    rows = np.vstack([difference, -difference])
    labels = np.concatenate([np.ones(count), np.zeros(count)])
    return rows, labels, np.tile(np.arange(count) // 2, 2)


OUTCOME_FIT = {"grid": REGULARISATION_GRID, "fit_intercept": True, "scoring": "roc_auc"}

CASES = {
    # rows, fit_intercept, scoring: fewer features than rows, and more (the basis of the rows)
    "outcomes, narrow": (lambda: _outcome_rows(240, 30, seed=0), True, "roc_auc"),
    "outcomes, wide": (lambda: _outcome_rows(240, 300, seed=1), True, "roc_auc"),
    "pairs, wide": (lambda: _pair_rows(120, 300, seed=2), False, "accuracy"),
}


@pytest.mark.parametrize("case", CASES)
def test_it_chooses_the_strength_and_the_head_scikit_learn_does(case):
    make, fit_intercept, scoring = CASES[case]
    rows, labels, groups = make()
    fitted = fit_by_group(
        rows, labels, groups, grid=REGULARISATION_GRID, fit_intercept=fit_intercept, scoring=scoring
    )

    expected = {}
    for strength in REGULARISATION_GRID:
        model = LogisticRegression(
            C=strength, fit_intercept=fit_intercept, tol=1e-10, max_iter=10_000
        )
        folds = GroupKFold(n_splits=5)
        by_fold = cross_val_score(model, rows, labels, groups=groups, cv=folds, scoring=scoring)
        expected[strength] = float(np.mean(by_fold))
    assert fitted.scores == pytest.approx(expected, abs=1e-6)
    assert fitted.strength == REGULARISATION_GRID[int(np.argmax(list(expected.values())))]

    reference = LogisticRegression(
        C=fitted.strength, fit_intercept=fit_intercept, tol=1e-10, max_iter=10_000
    ).fit(rows, labels)
    gap = np.linalg.norm(fitted.weights - reference.coef_.ravel())
    assert gap <= 1e-4 * np.linalg.norm(reference.coef_)
    probabilities = 1 / (1 + np.exp(-(rows @ fitted.weights + fitted.bias)))
    assert np.abs(probabilities - reference.predict_proba(rows)[:, 1]).max() < 1e-5


def test_a_groups_rows_never_straddle_a_fold():
    """Every group's rows copied four times with a random label each: a fold that saw a copy
    while validating another would score far above chance at the weakest strength."""
    rng = np.random.default_rng(3)
    distinct = rng.normal(size=(60, 80))
    rows = np.repeat(distinct, 4, axis=0)
    labels = np.repeat(rng.random(60) < 0.5, 4).astype(float)
    groups = np.repeat(np.arange(60), 4)
    by_group = head_fit._group_folds(groups)
    assert all(len(set(by_group[groups == group])) == 1 for group in range(60))

    weakest = (REGULARISATION_GRID[-1], REGULARISATION_GRID[-1] * 10)
    grouped = fit_by_group(
        rows, labels, groups, grid=weakest, fit_intercept=True, scoring="accuracy", final=False
    )
    by_row = fit_by_group(
        rows,
        labels,
        np.arange(len(rows)),
        grid=weakest,
        fit_intercept=True,
        scoring="accuracy",
        final=False,
    )
    assert max(grouped.scores.values()) < 0.7
    assert min(by_row.scores.values()) > 0.95  # what splitting the groups would have shown


def test_a_passed_deadline_tries_the_strongest_strength_only():
    rows, labels, groups = _outcome_rows(240, 20, seed=4)
    fitted = fit_by_group(
        rows,
        labels,
        groups,
        deadline=0.0,
        **OUTCOME_FIT,
    )
    assert list(fitted.scores) == [REGULARISATION_GRID[0]]
    assert fitted.strength == REGULARISATION_GRID[0]


@pytest.fixture
def solves(monkeypatch) -> list[dict]:
    """Each batched Newton solve's device and torch's threads while it ran."""
    seen: list[dict] = []
    solve = head_fit.newton

    def recording(design, *args, **kwargs):
        seen.append({"device": design.device, "threads": torch.get_num_threads()})
        return solve(design, *args, **kwargs)

    monkeypatch.setattr(head_fit, "newton", recording)
    return seen


def test_every_solve_runs_on_the_rows_device_and_a_missing_device_is_an_error(solves):
    rows, labels, groups = _outcome_rows(120, 10, seed=5)
    fitted = fit_by_group(
        torch.as_tensor(rows),
        labels,
        groups,
        **OUTCOME_FIT,
    )
    assert fitted.device == "cpu"
    assert len(solves) == len(REGULARISATION_GRID) + 1  # the grid's strengths, then the head
    assert {solve["device"].type for solve in solves} == {"cpu"}
    if not torch.cuda.is_available():
        # Asked for a card it does not have, the fit fails rather than run on the CPU.
        with pytest.raises((AssertionError, RuntimeError)):
            fit_by_group(
                rows,
                labels,
                groups,
                device="cuda",
                **OUTCOME_FIT,
            )


def test_the_cpu_fit_runs_on_one_thread_and_gives_the_threads_back(solves):
    before = torch.get_num_threads()
    rows, labels, groups = _outcome_rows(90, 8, seed=6)
    fit_by_group(rows, labels, groups, grid=(1.0,), fit_intercept=True, scoring="roc_auc")
    assert [solve["threads"] for solve in solves] == [head_fit.CPU_THREADS]
    assert torch.get_num_threads() == before


def test_repeated_rows_take_the_qr_basis_and_still_match_scikit_learn():
    """Rows that repeat make their Gram matrix singular: the Cholesky basis gives way to QR."""
    rows, labels, _groups = _outcome_rows(40, 200, seed=7)
    rows, labels = np.vstack([rows, rows]), np.concatenate([labels, labels])
    fitted = fit_by_group(
        rows, labels, np.arange(80), grid=(0.3,), fit_intercept=True, scoring="roc_auc"
    )
    reference = LogisticRegression(C=0.3, tol=1e-10, max_iter=10_000).fit(rows, labels)
    gap = np.linalg.norm(fitted.weights - reference.coef_.ravel())
    assert gap <= 1e-4 * np.linalg.norm(reference.coef_)


def test_scores_equal_but_for_their_last_bit_choose_the_stronger_strength():
    tied = {0.1: 0.5402173913043478, 0.3: 0.53, 10.0: 0.5402173913043479}
    assert head_fit._best(tied) == 0.1
    assert head_fit._best({0.1: 0.5, 10.0: 0.6}) == 10.0
