"""How well the default fitted judge agrees with real people and real outcomes, next to the rubric.

    python -m bench.judge_agreement [--seed 0] [--score-items 1000]

Fits the judge exactly as a world's fit does (trainers.judge_fit) on the shared real data:
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
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from arena.judging import DIMENSIONS
from arena.judging.fitted import FittedJudge, outcome_rows, preference_rows
from trainers.judge_fit import JudgeFitSpec, fit

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
CALLS = SHARED / "real-calls" / "persuasionforgood" / "calls.jsonl"
PAIRS = SHARED / "preferences" / "hh-rlhf-harmless" / "pairs.jsonl"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(block: dict | None, key: str) -> str:
    if not block or block.get(key) is None:
        return "—"
    interval = block.get(f"{key}_ci")
    text = f"{block[key]:.3f}"
    return text + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--score-items", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=5, help="0 to skip the cross-validation")
    arguments = parser.parse_args()

    started = time.monotonic()
    outcomes = outcome_rows(_lines(CALLS))
    pairs = preference_rows(_lines(PAIRS))
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
        print(f"{arguments.folds}-fold cross-validation by group (each fold fitted on the rest):")
        accuracy, auc_fitted, auc_rubric, accuracy_rubric = [], [], [], []
        for fold in range(arguments.folds):
            folded = dataclasses.replace(
                spec, held_out_fraction=1 / arguments.folds, held_out_fold=fold
            )
            _model, fold_report = fit(folded)
            accuracy.append(fold_report["pairs"]["fitted"]["accuracy"])
            accuracy_rubric.append(fold_report["pairs"]["rubric"]["accuracy"])
            auc_fitted.append(fold_report["outcomes"]["fitted"]["auc"])
            auc_rubric.append(fold_report["outcomes"]["rubric"]["auc"])
        for label, fitted_values, rubric_values in (
            ("pair accuracy", accuracy, accuracy_rubric),
            ("outcome AUC by call", auc_fitted, auc_rubric),
        ):
            print(
                f"  {label:<22} fitted {np.mean(fitted_values):.3f} "
                f"(folds {min(fitted_values):.3f}–{max(fitted_values):.3f}) · rubric "
                f"{np.mean(rubric_values):.3f} (folds {min(rubric_values):.3f}–"
                f"{max(rubric_values):.3f})"
            )

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
