"""Does "most informative first" teach the judge faster than a random order? A simulation
on the shared preference pairs (issue 30, item 4).

    python -m bench.informative_queue                      # the default run (a few minutes)
    python -m bench.informative_queue --seeds 3 --round 100  # a quicker, rougher one

The pairs are split by pair into a held-out part (trainers.judge.fit.split_rows, seed 0) and a
pool the simulated reviewers pick from. The learner is the fitted judge's own preference fit
(trainers.judge.fit: TF-IDF Featurizer fitted on the pool's texts, the rubric numbers as
extra features, fit_preference_head), refitted after each round of picks. To keep the run
short its regularisation strength is chosen once per seed, by fit.py's own
regularisation_by_group on that seed's first 400 random picks, and kept for every refit of
both orders (--choose-each-refit chooses it on every refit, as a world's fit does: about ten
times slower). Each seed starts both orders from the same random first round; then
  (a) informative: each round takes the pool pairs the current fit is least sure of
      (|logit(a) - logit(b)| smallest, the Bradley-Terry probability nearest 0.5);
  (b) random: each round takes pool pairs in a random order.
It prints the held-out accuracy (pairs where the chosen reply scores above the rejected one)
after 100, 200 and 400 picks, each as the mean over seeds with a 95% bootstrap interval over
the seeds, and how many picks the informative order needs to reach the random order's
400-pick mean (counted in whole rounds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import numpy as np

from levers9.shipped_data import HH_RLHF_PAIRS

CHECKPOINTS = (100, 200, 400)


def _rows(path: Path) -> list[dict]:
    from bench.django_app import setup_django

    setup_django()
    from trainers.judge.fitted_judge import preference_rows

    with path.open() as lines:
        return preference_rows(json.loads(line) for line in lines if line.strip())


def _accuracy(head, chosen, rejected) -> float:
    return float(np.mean(head.logits(chosen) > head.logits(rejected)))


def _strength(pool_chosen, pool_rejected, shuffled, most: int) -> float:
    """fit.py's choice of regularisation on the seed's first `most` random picks, made the
    way fit_preference_head makes it."""
    from scipy import sparse

    from trainers.judge.fit import regularisation_by_group

    index = shuffled[:most]
    difference = pool_chosen[index] - pool_rejected[index]
    zero = sparse.csr_matrix((difference.shape[0], 1))
    rows = sparse.vstack([sparse.hstack([difference, zero]), sparse.hstack([-difference, zero])])
    labels = np.concatenate([np.ones(len(index)), np.zeros(len(index))])
    groups = np.concatenate([np.arange(len(index))] * 2)
    return regularisation_by_group(
        rows.tocsr(), labels, groups, fit_intercept=False, scoring="accuracy"
    )


def _simulate(features, *, order: str, seed: int, step: int, most: int, strength):
    from trainers.judge import fit as fit_module

    pool_chosen, pool_rejected, held_chosen, held_rejected = features
    shuffled = np.random.default_rng(seed).permutation(pool_chosen.shape[0])
    fixed = (
        nullcontext()
        if strength is None
        else mock.patch.object(fit_module, "regularisation_by_group", return_value=strength)
    )
    with fixed:
        return _curve(features, fit_module, shuffled, order=order, seed=seed, step=step, most=most)


def _curve(features, fit_module, shuffled, *, order: str, seed: int, step: int, most: int):
    pool_chosen, pool_rejected, held_chosen, held_rejected = features
    size = pool_chosen.shape[1]
    taken = list(shuffled[:step])  # the same cold start for both orders
    curve = {}
    while True:
        index = np.asarray(taken)
        head = fit_module.fit_preference_head(
            pool_chosen[index], pool_rejected[index], None, None, size=size, seed=seed
        )
        curve[len(taken)] = _accuracy(head, held_chosen, held_rejected)
        if len(taken) >= most:
            return curve
        left = np.setdiff1d(np.arange(pool_chosen.shape[0]), index)
        if order == "informative":
            gap = np.abs(head.logits(pool_chosen[left]) - head.logits(pool_rejected[left]))
            # Stable: equal gaps keep the random order's rank.
            rank = np.argsort(shuffled)[left]
            picked = left[np.lexsort((rank, gap))[:step]]
        else:
            already = set(taken)
            picked = [i for i in shuffled if i not in already][:step]
        taken += list(picked)


def _interval(values: list[float], *, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    values_array = np.asarray(values)
    means = rng.choice(values_array, size=(2000, len(values_array))).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HH_RLHF_PAIRS)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--round", type=int, default=50, help="picks per refit")
    parser.add_argument("--held-out", type=float, default=0.3)
    parser.add_argument("--choose-each-refit", action="store_true")
    args = parser.parse_args(argv)
    from trainers.judge.fit import Featurizer, _pair_features, _texts, split_rows

    started = time.monotonic()
    rows = _rows(args.data)
    pool, held = split_rows(rows, seed=0, fraction=args.held_out)
    most = max(CHECKPOINTS)
    if len(pool) < most:
        print(f"Only {len(pool)} pairs in the pool; {most} are needed.", file=sys.stderr)
        return 2
    featurizer = Featurizer.fit(_texts(pool, [], []), extra_size=len(pool[0]["rubric_chosen"]))
    features = (*_pair_features(featurizer, pool), *_pair_features(featurizer, held))
    curves: dict[str, list[dict[int, float]]] = {"informative": [], "random": []}
    strengths = []
    for seed in range(args.seeds):
        strength = None
        if not args.choose_each_refit:
            shuffled = np.random.default_rng(seed).permutation(len(pool))
            strength = _strength(features[0], features[1], shuffled, most)
            strengths.append(strength)
        for order in curves:
            curves[order].append(
                _simulate(
                    features,
                    order=order,
                    seed=seed,
                    step=args.round,
                    most=most,
                    strength=strength,
                )
            )
    chosen = f"C chosen once per seed: {strengths}" if strengths else "C chosen on each refit"
    print(
        f"{len(rows)} pairs: {len(pool)} in the pool, {len(held)} held out; "
        f"{args.seeds} seeds, refit every {args.round} picks; {chosen}"
    )
    print(f"{'picks':>6} | {'informative first':>26} | {'random order':>26}")
    for picks in CHECKPOINTS:
        cells = []
        for order in curves:
            values = [curve[picks] for curve in curves[order] if picks in curve]
            low, high = _interval(values)
            cells.append(f"{np.mean(values):.3f} [{low:.3f}, {high:.3f}]")
        print(f"{picks:>6} | {cells[0]:>26} | {cells[1]:>26}")
    target = np.mean([curve[most] for curve in curves["random"]])
    steps = sorted(curves["informative"][0])
    reached = next(
        (n for n in steps if np.mean([curve[n] for curve in curves["informative"]]) >= target),
        None,
    )
    print(
        f"random order's {most}-pick accuracy {target:.3f}: informative first reaches it "
        + (f"after {reached} picks" if reached else f"not within {most} picks")
    )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
