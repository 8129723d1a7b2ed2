"""offline-outcome: a move strategy learned off-line from labelled real calls and their
outcomes, for a world with no simulator.

    python -m trainers.moves.offline_outcome --spec spec.json --out result.json

The spec (plain JSON):
    {"algorithm": "offline-outcome",
     "moves": ["greet", "ask", ...],             # the world's move names, in its order
     "calls": [{"id": "c1", "won": true,        # the TRAINING calls only: the platform
                "moves": ["greet", "ask", ...]}], # never packs a held-out call
     "seed": 0}

What it learns: a per-state outcome model. The state at an agent turn is (where in the call,
the agent's previous move); where is a bucket of the agent-turn number (POSITION_BUCKETS,
known at the time of the turn, unlike the call's length). For each state and move it counts
the turns and how many were in won calls, and estimates the won share with shrinkage:

    share(move)        = (won(move) + k * share(all)) / (turns(move) + k)
    share(state, move) = (won(state, move) + k * share(move)) / (turns(state, move) + k)

k is chosen by cross-validation BY CALL on the training calls (the log-loss of the won share
on calls left out of each fold), so rare moves are pulled towards their move's and the
world's share as far as held-out calls say they should be. The strategy plays, per state, the
move with the highest smoothed share among the moves the real agents made there (a move
never seen in a state is never guessed there); a state never seen takes the move with the
highest share overall.

This is observational evidence (agents who made a move may have made it because the call was
going well): the platform measures the strategy on held-out calls it never saw
(trainers.moves.offline_comparison.outcome_policy_comparison) and says how far to trust it.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainers.registry import OFFLINE_OUTCOME
from trainers.runtime import Progress, silent_progress, trainer_main

ALGORITHM = OFFLINE_OUTCOME
LEARNER = "per-state outcome model (position bucket × previous move, smoothed won share)"
# Agent-turn numbers (0-based) where a bucket starts: turn 1, turns 2-3, turns 4-6, turn 7 on.
POSITION_BUCKETS = (0, 1, 3, 6)
SMOOTHING_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)
DEFAULT_SMOOTHING = 10.0
FOLDS = 5
START = ""  # the previous move before the agent's first turn


@dataclass(frozen=True)
class OfflineConfig:
    smoothing_grid: tuple[float, ...] = SMOOTHING_GRID
    """The shrinkage strengths k tried by cross-validation by call."""
    folds: int = FOLDS
    """How many folds (by a hash of the call id) the cross-validation uses."""


def position_bucket(agent_turn: int) -> int:
    """The bucket of a 0-based agent-turn number (an index into POSITION_BUCKETS)."""
    bucket = 0
    for index, start in enumerate(POSITION_BUCKETS):
        if agent_turn >= start:
            bucket = index
    return bucket


def bucket_label(bucket: int) -> str:
    start = POSITION_BUCKETS[bucket] + 1
    if bucket + 1 < len(POSITION_BUCKETS):
        end = POSITION_BUCKETS[bucket + 1]
        return f"turn {start}" if end == start else f"turns {start}-{end}"
    return f"turn {start} on"


def state_key(bucket: int, previous: str) -> str:
    return f"{bucket}|{previous}"


def call_states(moves: Sequence[str]) -> list[tuple[str, str]]:
    """(state key, move) at every agent turn of a call, in order."""
    states = []
    previous = START
    for turn, move in enumerate(moves):
        states.append((state_key(position_bucket(turn), previous), move))
        previous = move
    return states


@dataclass
class _Counts:
    turns: dict[str, dict[str, int]]
    won: dict[str, dict[str, int]]
    move_turns: dict[str, int]
    move_won: dict[str, int]
    calls: int
    won_calls: int


def _count(calls: Sequence[Mapping[str, Any]]) -> _Counts:
    turns: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    won: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    move_turns: dict[str, int] = defaultdict(int)
    move_won: dict[str, int] = defaultdict(int)
    for call in calls:
        outcome = int(bool(call["won"]))
        for key, move in call_states(call["moves"]):
            turns[key][move] += 1
            won[key][move] += outcome
            move_turns[move] += 1
            move_won[move] += outcome
    return _Counts(turns, won, move_turns, move_won, len(calls), sum(bool(c["won"]) for c in calls))


def _shares(counts: _Counts, smoothing: float) -> tuple[float, dict[str, float]]:
    # With no calls at all, a coin: nothing says any move is better than another.
    overall = (counts.won_calls + 1) / (counts.calls + 2)
    by_move = {
        move: (counts.move_won[move] + smoothing * overall) / (counts.move_turns[move] + smoothing)
        for move in counts.move_turns
    }
    return overall, by_move


def _predict(
    counts: _Counts, shares: tuple[float, dict[str, float]], smoothing: float, key: str, move: str
) -> float:
    overall, by_move = shares
    prior = by_move.get(move, overall)
    turns = counts.turns.get(key, {}).get(move, 0)
    won = counts.won.get(key, {}).get(move, 0)
    return (won + smoothing * prior) / (turns + smoothing)


def _fold_of(call_id: str, folds: int) -> int:
    return int(hashlib.sha256(str(call_id).encode()).hexdigest(), 16) % folds


def choose_smoothing(
    calls: Sequence[Mapping[str, Any]], config: OfflineConfig
) -> tuple[float, dict[str, Any]]:
    """The k with the lowest log-loss on calls left out (folds by call), and the losses."""
    fold_of = [_fold_of(c["id"], config.folds) for c in calls]
    usable = sorted(set(fold_of))
    if len(usable) < 2:
        return DEFAULT_SMOOTHING, {"chosen_by": "default (too few calls to cross-validate)"}
    losses: dict[float, float] = {}
    for smoothing in config.smoothing_grid:
        total, count = 0.0, 0
        for fold in usable:
            counts = _count([c for c, f in zip(calls, fold_of, strict=True) if f != fold])
            shares = _shares(counts, smoothing)
            for call in (c for c, f in zip(calls, fold_of, strict=True) if f == fold):
                outcome = bool(call["won"])
                for key, move in call_states(call["moves"]):
                    predicted = _predict(counts, shares, smoothing, key, move)
                    p = min(max(predicted, 1e-6), 1 - 1e-6)
                    total -= math.log(p if outcome else 1 - p)
                    count += 1
        losses[smoothing] = total / count if count else math.inf
    best = min(config.smoothing_grid, key=lambda k: (losses[k], k))
    return best, {
        "chosen_by": f"cross-validation by call ({len(usable)} folds)",
        "log_loss": {str(k): round(v, 5) for k, v in losses.items() if math.isfinite(v)},
    }


def outcome_choose_move(strategy: Mapping[str, Any], *, agent_turn: int, previous: str) -> str:
    """The move an "outcome" strategy plays at an agent turn after `previous` ("" first)."""
    choices = strategy.get("choices") or {}
    key = state_key(position_bucket(agent_turn), previous)
    return str(choices.get(key) or strategy["default"])


def fit(
    moves: Sequence[str],
    calls: Sequence[Mapping[str, Any]],
    config: OfflineConfig | None = None,
) -> dict[str, Any]:
    """The strategy and what it rests on (see the module docstring)."""
    config = config or OfflineConfig()
    known = set(moves)
    calls = [
        {"id": str(c["id"]), "won": bool(c["won"]), "moves": [m for m in c["moves"] if m in known]}
        for c in calls
    ]
    smoothing, cross_validation = choose_smoothing(calls, config)
    counts = _count(calls)
    overall, by_move = _shares(counts, smoothing)
    # Ties go to the earlier move in the world's order: the same answer every time.
    default = max(moves, key=lambda m: (by_move.get(m, overall), -moves.index(m)))
    choices: dict[str, str] = {}
    rows = []
    for bucket in range(len(POSITION_BUCKETS)):
        for previous in (START, *moves):
            key = state_key(bucket, previous)
            seen = [m for m in moves if counts.turns.get(key, {}).get(m)]
            if not seen:
                continue
            shares = {m: _predict(counts, (overall, by_move), smoothing, key, m) for m in seen}
            chosen = max(seen, key=lambda m: (shares[m], -moves.index(m)))
            choices[key] = chosen
            rows.append(
                {
                    "position": bucket_label(bucket),
                    "previous": previous or "(start)",
                    "move": chosen,
                    "won_share": round(shares[chosen], 4),
                    "turns": sum(counts.turns[key].values()),
                }
            )
    strategy = {
        "kind": "outcome",
        "moves": list(moves),
        "position_buckets": list(POSITION_BUCKETS),
        "choices": choices,
        "default": default,
    }
    return {
        "strategy": strategy,
        "smoothing": smoothing,
        "cross_validation": cross_validation,
        "trained_on": {
            "calls": counts.calls,
            "won": counts.won_calls,
            "agent_turns": sum(counts.move_turns.values()),
        },
        "won_share_by_move": {m: round(by_move.get(m, overall), 4) for m in moves},
        "states": rows,
    }


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Fit the per-state outcome model on the spec's (training) calls."""
    started = time.perf_counter()
    if spec.get("algorithm", ALGORITHM) != ALGORITHM:
        raise ValueError(f"this trainer runs {ALGORITHM}, not {spec.get('algorithm')!r}")
    moves = [str(m) for m in spec.get("moves") or []]
    if len(moves) < 2:
        raise ValueError("the spec names fewer than two moves to choose between")
    calls = list(spec.get("calls") or [])
    progress(0, 1, calls=len(calls))
    result = fit(moves, calls)
    progress(1, 1, calls=len(calls), smoothing=result["smoothing"])
    return {
        "algorithm": ALGORITHM,
        "learner": LEARNER,
        "seed": int(spec.get("seed") or 0),
        **result,
        "seconds": round(time.perf_counter() - started, 3),
    }


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description=f"{ALGORITHM}: {LEARNER}")


if __name__ == "__main__":
    raise SystemExit(main())
