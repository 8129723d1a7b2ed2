"""q-learning-online against ppo over moves, on the same scenarios and seeds, on ONE core.

    python -m bench.q_learning_vs_ppo [--seeds 0 1 2]

For every default scenario and seed, each learner runs alone on that scenario with its
default knobs; the table gives the exact fraction of the optimal expected return its greedy
table reaches and the seconds it took (training plus the exact report). Then the Train card's
own run, Q-learning with default knobs on all six scenarios at once, is timed per seed. The
last line says whether Q-learning reached 98% of the optimum on every scenario, each seed's
whole run staying under 30 s.

One core: the process pins itself to a single CPU before it starts, and BLAS is kept to one
thread when this module is the first to load numpy (as it is under `python -m`).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

# First of the project's imports: one BLAS thread, set before numpy loads.
from bench.one_core import pin_to_one_core
from trainers.moves import ppo as move_ppo
from trainers.moves import q_learning
from trainers.moves.simulator import DEFAULT_SCENARIOS

TARGET_FRACTION = 0.98
TARGET_SECONDS = 30.0


@dataclass(frozen=True)
class Row:
    slug: str
    seed: int
    optimal: float
    q_fraction: float
    q_seconds: float
    q_cpu: float
    ppo_fraction: float
    ppo_seconds: float
    ppo_cpu: float
    ppo_clip_fraction: float


def _timed(run, spec: dict) -> tuple[dict, float, float]:
    """The result, wall seconds, and CPU seconds of this process (the one core it holds;
    on a shared machine wall time also counts waiting for that core)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = run(spec)
    return result, time.perf_counter() - started, time.process_time() - cpu_started


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    print(f"one core: {pin_to_one_core()}; default knobs for both learners")  # noqa: T201
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        print(f"machine load at start: {load:.1f} on {os.cpu_count()} CPUs")  # noqa: T201

    rows: list[Row] = []
    for scenario in DEFAULT_SCENARIOS:
        for seed in args.seeds:
            spec = {"scenarios": [scenario.slug], "seed": seed}
            q_result, q_seconds, q_cpu = _timed(q_learning.run, spec)
            ppo_result, ppo_seconds, ppo_cpu = _timed(move_ppo.run, spec)
            q_report, ppo_report = q_result["scenarios"][0], ppo_result["scenarios"][0]
            rows.append(
                Row(
                    slug=scenario.slug,
                    seed=seed,
                    optimal=q_report["optimal_return"],
                    q_fraction=q_report["fraction_of_optimum"],
                    q_seconds=q_seconds,
                    q_cpu=q_cpu,
                    ppo_fraction=ppo_report["fraction_of_optimum"],
                    ppo_seconds=ppo_seconds,
                    ppo_cpu=ppo_cpu,
                    ppo_clip_fraction=ppo_result["metrics"]["clip_fraction_mean"],
                )
            )

    header = (
        f"{'scenario':<28} {'seed':>4} {'optimum':>8} │ {'Q frac':>7} {'wall s':>6} {'cpu s':>6} │ "
        f"{'PPO frac':>8} {'wall s':>6} {'cpu s':>6} {'clip':>6}"
    )
    print(header)  # noqa: T201
    print("─" * len(header))  # noqa: T201
    for row in rows:
        print(  # noqa: T201
            f"{row.slug:<28} {row.seed:>4} {row.optimal:>8.3f} │ {row.q_fraction:>7.4f} "
            f"{row.q_seconds:>6.2f} {row.q_cpu:>6.2f} │ {row.ppo_fraction:>8.4f} "
            f"{row.ppo_seconds:>6.2f} {row.ppo_cpu:>6.2f} {row.ppo_clip_fraction:>6.3f}"
        )
    print("─" * len(header))  # noqa: T201
    q_min = min(row.q_fraction for row in rows)
    ppo_min = min(row.ppo_fraction for row in rows)
    q_mean = sum(row.q_fraction for row in rows) / len(rows)
    ppo_mean = sum(row.ppo_fraction for row in rows) / len(rows)
    print(f"fraction of optimum, min / mean: Q-learning {q_min:.4f} / {q_mean:.4f}")  # noqa: T201
    print(f"fraction of optimum, min / mean: PPO        {ppo_min:.4f} / {ppo_mean:.4f}")  # noqa: T201

    # --- the Train card's run: every default scenario at once, default knobs ---
    whole_cpu = []
    for seed in args.seeds:
        result, seconds, cpu = _timed(q_learning.run, {"seed": seed})
        whole_cpu.append(cpu)
        lowest = result["summary"]["min_fraction_of_optimum"]
        print(  # noqa: T201
            f"Q-learning, all six scenarios in one run, seed {seed}: {cpu:.1f} s CPU "
            f"({seconds:.1f} s wall), min fraction {lowest:.4f}"
        )
    reached = q_min >= TARGET_FRACTION and max(whole_cpu) < TARGET_SECONDS
    print(  # noqa: T201
        f"Q-learning reached >= {TARGET_FRACTION:.0%} of the optimum on every scenario and seed "
        f"(min {q_min:.4f}); the whole six-scenario run took <= {max(whole_cpu):.1f} s of one "
        f"core (target < {TARGET_SECONDS:.0f} s): {'YES' if reached else 'NO'}"
    )
    return rows


if __name__ == "__main__":
    main()
