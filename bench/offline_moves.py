"""Moves on real calls, measured on the shared PersuasionForGood calls (issue 14, points 3-4).

    python -m bench.offline_moves              # all 1,017 calls (about a minute on one core)
    python -m bench.offline_moves --calls 300  # the first 300

Pure Python, no database: the same code the platform runs, on the file.

1. The move labeller (trainers.moves.labels.WorldMoveLabeller) labels every agent turn with the
   world's generic moves (arena.moves.GENERIC_MOVES): how often each move is given. Agreement
   with reviewers' corrections needs corrections; the shared file has none, so none is claimed.
2. The off-line learner (trainers.moves.offline_outcome) fits
   on the calls that are not held out, and
   trainers.moves.offline_comparison measures it on the held-out calls against the real agents' own
   moves: won share of the calls agreeing with it at least as much as average against the
   rest, the difference and its 95% bootstrap interval. The held-out calls are chosen as
   arena.held_out chooses them (40 by a hash of the id, calls with 4+ agent turns first).
3. The same measurement with 5 folds by call over every call (each fold held out once, the
   learner fitted on the other four), for an interval on more than 40 calls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from itertools import islice

from arena.moves import GENERIC_MOVES
from levers9.shipped_data import PERSUASION_CALLS
from trainers.moves.labels import fit_world_labeller
from trainers.moves.offline_comparison import comparison_trust, outcome_policy_comparison
from trainers.moves.offline_outcome import fit

HELD_OUT_CALLS = 40  # arena.held_out.HELD_OUT_CALLS
TURNS_PER_CALL = 4  # arena.held_out.TURNS_PER_CALL


def _order_key(external_id: str) -> str:
    return hashlib.sha256(external_id.encode()).hexdigest()  # arena.held_out._call_order_key


def held_out_ids(calls: list[dict]) -> set[str]:
    """arena.held_out.real_calls_choose, on plain calls (nothing held out under 80 calls)."""
    if len(calls) < 2 * HELD_OUT_CALLS:
        return set()
    agent_calls = [c for c in calls if any(t["speaker"] == "agent" for t in c["turns"])]
    agent_calls.sort(
        key=lambda c: (
            sum(t["speaker"] == "agent" for t in c["turns"]) < TURNS_PER_CALL,
            _order_key(c["id"]),
        )
    )
    return {c["id"] for c in agent_calls[:HELD_OUT_CALLS]}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=0, help="only the first N calls (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with PERSUASION_CALLS.open() as lines:
        raw = [json.loads(line) for line in islice(lines, args.calls or None)]

    # --- 1. labels with the world's moves ---
    labeller = fit_world_labeller(GENERIC_MOVES)
    given: Counter[str] = Counter()
    calls = []
    for call in raw:
        labels = labeller.label_turns(call["turns"])
        moves = [label[0] for label in labels if label is not None]
        given.update(moves)
        calls.append({"id": call["id"], "won": call["outcome"] == "won", "moves": moves})
    total = sum(given.values())
    _say(
        f"calls {len(calls)}, agent turns {total}, won share "
        f"{sum(c['won'] for c in calls) / len(calls):.3f}"
    )
    _say("labels: " + ", ".join(f"{m} {n / total:.3f}" for m, n in given.most_common()))
    _say("labeller agreement with reviewers' corrections: none to measure (no corrections)")

    names = [move["name"] for move in GENERIC_MOVES]

    # --- 2. the platform's split: fit off the held-out calls, compare on them ---
    held = held_out_ids(raw)
    train = [c for c in calls if c["id"] not in held]
    test = [c for c in calls if c["id"] in held]
    result = fit(names, train)
    comparison = outcome_policy_comparison(result["strategy"], test, seed=args.seed)
    _say(
        f"learner: trained on {result['trained_on']['calls']} calls, smoothing k="
        f"{result['smoothing']:g} ({result['cross_validation']['chosen_by']})"
    )
    _say(_comparison_line("held-out (40)", comparison))
    _say(f"trust: {comparison_trust(comparison)}")

    # --- 3. five folds by call over every call ---
    folds = 5
    pooled = []
    for fold in range(folds):
        in_fold = [c for c in calls if int(_order_key(c["id"]), 16) % folds == fold]
        rest = [c for c in calls if int(_order_key(c["id"]), 16) % folds != fold]
        strategy = fit(names, rest)["strategy"]
        # Each held-out call is scored by the strategy that never saw it.
        pooled += [{**c, "strategy": strategy} for c in in_fold]
    # The comparison takes one strategy; score each fold's calls with its own and pool.
    per_fold = [outcome_policy_comparison(p["strategy"], [p], seed=args.seed) for p in pooled]
    agreement = [row["mean_agreement"] for row in per_fold]
    mean = sum(agreement) / len(agreement)
    won = [p["won"] for p in pooled]
    agree = [a >= mean - 1e-9 for a in agreement]
    _say(_pooled_line(won, agree, seed=args.seed))
    return 0


def _comparison_line(name: str, c: dict) -> str:
    interval = c["interval"]
    ci = f"[{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "none"
    return (
        f"{name}: calls {c['held_out_calls']}, mean agreement {c['mean_agreement']:.3f}; "
        f"agreeing {c['agree']['calls']} won {c['agree']['won_share']}, "
        f"others {c['disagree']['calls']} won {c['disagree']['won_share']}; "
        f"difference {c['difference']}, 95% interval {ci}"
    )


def _pooled_line(won: list[bool], agree: list[bool], *, seed: int) -> str:
    import numpy as np

    won_array, agree_array = np.asarray(won, float), np.asarray(agree)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(2000):
        pick = rng.integers(0, len(won_array), len(won_array))
        a, w = agree_array[pick], won_array[pick]
        if a.any() and not a.all():
            draws.append(w[a].mean() - w[~a].mean())
    low, high = np.percentile(draws, [2.5, 97.5])
    agreeing, others = won_array[agree_array], won_array[~agree_array]
    return (
        f"5 folds by call: calls {len(won_array)}; agreeing {len(agreeing)} won "
        f"{agreeing.mean():.3f}, others {len(others)} won {others.mean():.3f}; difference "
        f"{agreeing.mean() - others.mean():+.3f}, 95% interval [{low:+.3f}, {high:+.3f}]"
    )


if __name__ == "__main__":
    raise SystemExit(main())
