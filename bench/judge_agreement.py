"""How well the default fitted judge agrees with real people and real outcomes, next to the rubric.

    python -m bench.judge_agreement [--seed 0] [--score-items 1000]

Fits the judge exactly as a world's fit does (trainers.judge.fit) on the shared real data:
the PersuasionForGood calls (the opening's first four agent turns, labelled won when the
persuadee donated) and the hh-rlhf harmless pairs (real human preferences). A fifth of each is
held out by group (a call, a pair) before anything is fitted; the figures are on that part only,
with 95% bootstrap intervals, and the rubric is measured on the same rows. Then it times the
fitted judge scoring batches of items, as the scoring API does (p50 / p95 over repeats).

Run it with /usr/bin/time -v for the peak memory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.judge.fit import (
    JudgeFitSpec,
    fit,
    outcome_agreement,
    pair_agreement,
    per_call_scores,
    split_rows,
)
from trainers.judge.fitted_judge import FittedJudge, outcome_rows, preference_rows
from trainers.judge.rubric import DIMENSIONS
from trainers.stats.auc import auc
from trainers.stats.intervals import BOOTSTRAP


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(block: dict | None, key: str) -> str:
    if not block or block.get(key) is None:
        return "—"
    interval = block.get(f"{key}_ci")
    text = f"{block[key]:.3f}"
    return text + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def judge_totals(judge, rows: list[dict], side: str) -> np.ndarray:
    """The judge's total for one side ("chosen" or "rejected") of each preference row."""
    scored = judge.score(
        [row["context"] for row in rows],
        [row[side] for row in rows],
        [row[f"rubric_{side}"] for row in rows],
        digits=None,
    )
    return np.asarray([item["total"] for item in scored])


def judge_won_probability_by_call(judge, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The judge's won probability of each call of these outcome rows (its turns' scores
    gathered by per_call_scores), and whether each call was won."""
    scored = judge.score(
        [row["context"] for row in rows],
        [row["reply"] for row in rows],
        [row["rubric"] for row in rows],
        digits=None,
    )
    return per_call_scores(rows, np.asarray([item["won_probability"] for item in scored]))


def _cross_fitted(spec: JudgeFitSpec, pairs: list, outcomes: list, *, folds: int) -> None:
    """Every row scored once by the fit of the folds that did not hold it (held out by pair
    and by call), so the figures rest on all the data, not a fifth of it; the difference to
    the rubric gets a paired bootstrap interval over the same pairs and calls."""
    fitted_c, fitted_r, rubric_c, rubric_r = [], [], [], []
    call_fitted, call_rubric, call_won = [], [], []
    for fold in range(folds):
        folded = dataclasses.replace(spec, held_out_fraction=1 / folds, held_out_fold=fold)
        model, _report = fit(folded)
        split = {"seed": spec.seed, "fraction": 1 / folds, "fold": fold}
        held_pairs = split_rows(pairs, **split)[1]
        for side, into, rubric_into in (
            ("chosen", fitted_c, rubric_c),
            ("rejected", fitted_r, rubric_r),
        ):
            into += judge_totals(model, held_pairs, side).tolist()
            rubric_into += [row[f"rubric_{side}"][-1] for row in held_pairs]
        held_outcomes = split_rows(outcomes, **split)[1]
        by_call, won = judge_won_probability_by_call(model, held_outcomes)
        rubric_by_call, _ = per_call_scores(
            held_outcomes, np.asarray([row["rubric"][-1] for row in held_outcomes])
        )
        call_fitted += by_call.tolist()
        call_rubric += rubric_by_call.tolist()
        call_won += won.tolist()

    arrays = [np.asarray(values) for values in (fitted_c, fitted_r, rubric_c, rubric_r)]
    fitted_pairs = pair_agreement(arrays[0], arrays[1], seed=spec.seed)
    rubric_pairs = pair_agreement(arrays[2], arrays[3], seed=spec.seed)
    won = np.asarray(call_won, dtype=bool)
    fitted_out = outcome_agreement(np.asarray(call_fitted), won, seed=spec.seed)
    rubric_out = outcome_agreement(np.asarray(call_rubric), won, seed=spec.seed)

    def agree(chosen: np.ndarray, rejected: np.ndarray) -> np.ndarray:
        return (chosen - rejected > 1e-9).astype(float)

    pair_gap = _paired_interval(
        np.column_stack([agree(arrays[0], arrays[1]), agree(arrays[2], arrays[3])]),
        lambda sample: float(sample[:, 0].mean() - sample[:, 1].mean()),
        seed=spec.seed,
    )
    outcome_gap = _paired_interval(
        np.column_stack([call_fitted, call_rubric, won.astype(float)]),
        lambda sample: _auc_gap(sample),
        seed=spec.seed,
    )
    print(f"{folds}-fold cross-fitted (every row scored by the fit that never saw it):")
    print(f"{'measure':<38}{'fitted judge':<28}{'rubric':<28}{'fitted − rubric':<24}")
    print(
        f"{'hh-rlhf pair accuracy':<38}{_fmt(fitted_pairs, 'accuracy'):<28}"
        f"{_fmt(rubric_pairs, 'accuracy'):<28}{_gap(pair_gap)}"
    )
    print(
        f"{'  pairs / kappa':<38}"
        f"{str(fitted_pairs['pairs']) + ' / ' + str(fitted_pairs['kappa']):<28}"
        f"{str(rubric_pairs['pairs']) + ' / ' + str(rubric_pairs['kappa']):<28}"
    )
    print(
        f"{'PersuasionForGood outcome AUC by call':<38}{_fmt(fitted_out, 'auc'):<28}"
        f"{_fmt(rubric_out, 'auc'):<28}{_gap(outcome_gap)}"
    )
    print(f"{'  calls (won)':<38}{fitted_out['calls']} ({fitted_out['won']})")


def _auc_gap(sample: np.ndarray) -> float:
    won = sample[:, 2] > 0.5
    fitted, rubric = auc(sample[:, 0], won), auc(sample[:, 1], won)
    return math.nan if fitted is None or rubric is None else fitted - rubric


def _paired_interval(rows: np.ndarray, statistic, *, seed: int) -> tuple[float, float, float]:
    """The statistic and its 95% bootstrap interval, resampling rows (a pair, a call) whole so
    both judges are always measured on the same sample."""
    rng = np.random.default_rng(seed)
    draws = [statistic(rows[rng.integers(0, len(rows), len(rows))]) for _ in range(BOOTSTRAP)]
    draws = [value for value in draws if not math.isnan(value)]
    return statistic(rows), float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def _gap(gap: tuple[float, float, float]) -> str:
    value, low, high = gap
    verdict = "beyond the interval" if low > 0 else "within the interval"
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}] {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--score-items", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=5, help="0 to skip the cross-validation")
    arguments = parser.parse_args()

    started = time.monotonic()
    outcomes = outcome_rows(_lines(PERSUASION_CALLS))
    pairs = preference_rows(_lines(HH_RLHF_PAIRS))
    rows_seconds = time.monotonic() - started
    spec = JudgeFitSpec(
        dimensions=list(DIMENSIONS),
        pairs=pairs,
        overrides=[],
        outcomes=outcomes,
        seed=arguments.seed,
    )
    started = time.monotonic()
    model, report = fit(spec)
    fit_seconds = time.monotonic() - started

    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(f"rows: {len(pairs)} pairs, {len(outcomes)} outcome turns ({rows_seconds:.1f} s)")
    print(
        f"held out: {report['held_out']['pairs']} pairs, "
        f"{report['outcomes']['fitted']['calls']} calls "
        f"({report['held_out']['outcome_turns']} turns)"
    )
    print(f"fit: {fit_seconds:.1f} s on the training part ({report['trained_on']})")
    print()
    print(f"{'measure (held out)':<38}{'fitted judge':<28}{'rubric':<28}")
    fitted_pairs, rubric_pairs = report["pairs"]["fitted"], report["pairs"]["rubric"]
    print(
        f"{'hh-rlhf pair accuracy':<38}{_fmt(fitted_pairs, 'accuracy'):<28}"
        f"{_fmt(rubric_pairs, 'accuracy'):<28}"
    )
    print(
        f"{'  ties / kappa':<38}"
        f"{str(fitted_pairs['ties']) + ' / ' + str(fitted_pairs['kappa']):<28}"
        f"{str(rubric_pairs['ties']) + ' / ' + str(rubric_pairs['kappa']):<28}"
    )
    fitted_out, rubric_out = report["outcomes"]["fitted"], report["outcomes"]["rubric"]
    print(
        f"{'PersuasionForGood outcome AUC by call':<38}{_fmt(fitted_out, 'auc'):<28}"
        f"{_fmt(rubric_out, 'auc'):<28}"
    )
    print()
    print("reliability (held-out calls): predicted → observed won share (count)")
    for row in report["outcomes"]["reliability"]:
        print(f"  {row['predicted']:.2f} → {row['observed']:.2f} ({row['count']})")

    if arguments.folds:
        print()
        _cross_fitted(spec, pairs, outcomes, folds=arguments.folds)

    with tempfile.TemporaryDirectory() as folder:
        model.save(Path(folder))
        judge = FittedJudge.load(Path(folder), model_name="fitted bench")
        items = [(row["context"], row["reply"]) for row in outcomes[: arguments.score_items]]
        timings = []
        for _ in range(7):
            started = time.monotonic()
            judge.score_many(items)
            timings.append(time.monotonic() - started)
    p50, p95 = np.percentile(timings, 50), np.percentile(timings, 95)
    print()
    print(f"scoring {len(items)} items: p50 {p50:.3f} s, p95 {p95:.3f} s (7 repeats)")


if __name__ == "__main__":
    main()
