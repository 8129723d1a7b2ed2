"""The one AUC, against scikit-learn's roc_auc_score."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from trainers.stats.auc import auc, stratified_auc


@pytest.mark.parametrize("seed", range(20))
def test_it_matches_scikit_learn_with_ties(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, 40).astype(float)  # few values: many ties
    labels = rng.random(40) < 0.3
    labels[:2] = [True, False]
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_it_reads_zero_one_labels_as_booleans():
    scores = [0.1, 0.4, 0.35, 0.8]
    assert auc(scores, [0.0, 0.0, 1.0, 1.0]) == auc(scores, [False, False, True, True]) == 0.75


def test_it_is_none_with_one_class_only():
    assert auc([0.2, 0.9], [True, True]) is None
    assert auc([], []) is None


def test_stratified_counts_only_pairs_inside_a_stratum():
    # Each stratum alone ranks perfectly; pooled, stratum b's higher offset breaks it.
    scores = [0.1, 0.2, 0.8, 0.9]
    labels = [False, True, False, True]
    strata = ["a", "a", "b", "b"]
    assert stratified_auc(scores, labels, strata) == 1.0
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores)) == 0.75


def test_stratified_weights_each_stratum_by_its_pairs():
    rng = np.random.default_rng(3)
    scores, labels = rng.random(30), rng.random(30) < 0.5
    strata = rng.integers(0, 3, 30)
    u = pairs = 0.0
    for stratum in range(3):
        inside = strata == stratum
        positives, negatives = int(labels[inside].sum()), int((~labels[inside]).sum())
        u += roc_auc_score(labels[inside], scores[inside]) * positives * negatives
        pairs += positives * negatives
    assert stratified_auc(scores, labels, strata) == pytest.approx(u / pairs)
    assert stratified_auc([0.3, 0.4], [True, False], ["a", "b"]) is None
