"""The reward models' probe head fit: scikit-learn's grid as it ran until issue 29 (30 fits a
run, one BLAS thread, on the CPU) against the batched torch fit (trainers.reading.head_fit), on
random features with a planted direction at the probe's row counts.

    python -m bench.probe_head_fit [--widths 1024,2048,4096] [--parts pairs,outcomes]
                                   [--device cpu|cuda] [--skip-today]

pairs     920 training pairs (the shared hh-rlhf pairs less a fifth held out), fitted as
          both orders of each pair: 1,840 rows, no intercept, scored by accuracy
outcomes  1,500 opening turns of 375 calls (what the probe reads of the shared calls in a
          ten-minute CPU stage; a GPU reads all 3,458: --outcome-rows 3458), scored by AUC

Prints one row per part and width: seconds today and now, the strengths each chose, and how
well the two heads agree (cosine of the weights; the share of rows both put on the same side).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np


def _pairs(width: int, pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=width) / np.sqrt(width)
    chosen = rng.normal(size=(pairs, width)).astype(np.float32)
    rejected = rng.normal(size=(pairs, width)).astype(np.float32)
    chosen += (0.6 * direction).astype(np.float32)  # what reviewers prefer, faintly
    difference = (chosen - rejected).astype(np.float64)
    rows = np.vstack([difference, -difference])
    rows /= rows.std(axis=0)  # as reward_probe scales them
    labels = np.concatenate([np.ones(pairs), np.zeros(pairs)])
    groups = np.tile(np.arange(pairs), 2)
    return rows, labels, groups


def _outcomes(width: int, turns: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=width) / np.sqrt(width)
    features = rng.normal(size=(turns, width))
    won = (features @ direction + rng.normal(size=turns)) > 0
    features /= features.std(axis=0)
    return features, won.astype(float), np.arange(turns) // 4


def fit_today(rows, labels, groups, *, fit_intercept: bool, scoring: str) -> tuple[Any, float]:
    """The probe's head fit before issue 29: scikit-learn's grid and fit, newton-cholesky on
    one BLAS thread."""
    from sklearn.linear_model import LogisticRegression

    from trainers.judge.fit import regularisation_by_group
    from trainers.wording.reward_probe import _dense_fit

    with _dense_fit():
        strength = regularisation_by_group(
            rows,
            labels,
            groups,
            fit_intercept=fit_intercept,
            scoring=scoring,
            solver="newton-cholesky",
            batched=False,
        )
        model = LogisticRegression(
            C=strength, fit_intercept=fit_intercept, max_iter=3000, solver="newton-cholesky"
        ).fit(rows, labels)
    return model.coef_.ravel(), strength


def fit_now(rows, labels, groups, *, fit_intercept: bool, scoring: str, device: str):
    """The probe's head fit since issue 29: trainers.reading.head_fit, batched on `device`."""
    from trainers.wording.reward_probe import _fit_head

    return _fit_head(
        rows,
        labels,
        groups,
        fit_intercept=fit_intercept,
        scoring=scoring,
        deadline=None,
        device=device,
    )


def measure(part: str, width: int, args: argparse.Namespace) -> dict[str, Any]:
    if part == "pairs":
        rows, labels, groups = _pairs(width, args.pairs, seed=width)
        setting = {"fit_intercept": False, "scoring": "accuracy"}
    else:
        rows, labels, groups = _outcomes(width, args.outcome_rows, seed=width)
        setting = {"fit_intercept": True, "scoring": "roc_auc"}
    started = time.perf_counter()
    weights, strength = fit_now(rows, labels, groups, device=args.device, **setting)
    row = {
        "part": part,
        "width": width,
        "rows": rows.shape[0],
        "now_s": round(time.perf_counter() - started, 2),
        "now_C": strength,
    }
    if not args.skip_today:
        started = time.perf_counter()
        reference, today_strength = fit_today(rows, labels, groups, **setting)
        row["today_s"] = round(time.perf_counter() - started, 2)
        row["today_C"] = today_strength
        row["speedup"] = round(row["today_s"] / max(row["now_s"], 1e-9), 1)
        cosine = weights @ reference / np.linalg.norm(weights) / np.linalg.norm(reference)
        row["cosine"] = round(float(cosine), 6)
        row["same_side"] = float(np.mean((rows @ weights > 0) == (rows @ reference > 0)))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="1024,2048,4096")
    parser.add_argument("--parts", default="pairs,outcomes")
    parser.add_argument("--pairs", type=int, default=920)
    parser.add_argument("--outcome-rows", type=int, default=1500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-today", action="store_true", help="time only the torch fit")
    args = parser.parse_args(argv)
    columns = ["part", "width", "rows", "today_s", "now_s", "speedup", "today_C", "now_C"]
    columns += ["cosine", "same_side"]
    print(" | ".join(columns), flush=True)  # noqa: T201
    for part in args.parts.split(","):
        for width in (int(value) for value in args.widths.split(",")):
            row = measure(part, width, args)
            print(" | ".join(str(row.get(name, "-")) for name in columns), flush=True)  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
