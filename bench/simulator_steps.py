"""How fast the lettings world steps, and how far a fixed script is from the optimum.

    python -m bench.simulator_steps [--seconds 2] [--batch 4096]

Measures vectorised ``LettingsWorld.step_batch`` on ONE core: a batch of calls played
side by side under the optimal policy with 10% random moves (so every row of the model is
exercised), finished calls restarted in place. Run it with ``OMP_NUM_THREADS=1`` (and
``OPENBLAS_NUM_THREADS=1``) for a single-core figure; numpy's element-wise ops and fancy
indexing, which is all a step is, are single-threaded anyway.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from trainers.moves.simulator import DEFAULT_SCENARIOS, LettingsWorld, Scenario
from trainers.moves.value_iteration import best_fixed_sequence_return, solve_world


@dataclass(frozen=True)
class BenchConfig:
    seconds: float = 2.0
    """Wall-clock seconds of stepping per scenario."""
    batch: int = 4096
    """Calls simulated side by side."""
    epsilon: float = 0.1
    """Share of random moves mixed into the optimal policy."""
    seed: int = 0
    """Seed of the numpy Generator driving moves and outcomes."""


@dataclass(frozen=True)
class ScenarioBench:
    slug: str
    steps_per_second: float
    optimal_return: float
    best_fixed_return: float
    best_fixed_sequence: tuple[str, ...]


def bench_scenario(scenario: Scenario, config: BenchConfig) -> ScenarioBench:
    world = LettingsWorld(scenario.persona)
    solved = solve_world(world)
    fixed_value, fixed_sequence = best_fixed_sequence_return(world)
    rng = np.random.default_rng(config.seed)

    # --- step as many calls as fit in the time budget ---
    states = np.full(config.batch, world.initial_state, dtype=np.int64)
    steps = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < config.seconds:
        for _ in range(50):  # check the clock every 50 batches, not every batch
            actions = solved.policy[states]
            explore = rng.random(config.batch) < config.epsilon
            actions = np.where(explore, rng.integers(0, world.n_actions, config.batch), actions)
            states, _rewards, dones = world.step_batch(states, actions, rng)
            states = np.where(dones, world.initial_state, states)
            steps += config.batch
        elapsed = time.perf_counter() - start

    return ScenarioBench(
        slug=scenario.slug,
        steps_per_second=steps / elapsed,
        optimal_return=float(solved.values[world.initial_state]),
        best_fixed_return=fixed_value,
        best_fixed_sequence=fixed_sequence,
    )


def main(argv: list[str] | None = None) -> list[ScenarioBench]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=BenchConfig.seconds)
    parser.add_argument("--batch", type=int, default=BenchConfig.batch)
    args = parser.parse_args(argv)
    config = BenchConfig(seconds=args.seconds, batch=args.batch)

    results = [bench_scenario(scenario, config) for scenario in DEFAULT_SCENARIOS]
    header = f"{'scenario':<30} {'steps/s':>12} {'optimal':>9} {'best fixed':>11} {'gap':>7}"
    print(header)  # noqa: T201
    print("-" * len(header))  # noqa: T201
    for result in results:
        gap = result.optimal_return - result.best_fixed_return
        print(  # noqa: T201
            f"{result.slug:<30} {result.steps_per_second:>12,.0f} "
            f"{result.optimal_return:>9.3f} {result.best_fixed_return:>11.3f} {gap:>7.3f}"
        )
    print()  # noqa: T201
    for result in results:
        print(f"{result.slug}: best fixed script {' > '.join(result.best_fixed_sequence)}")  # noqa: T201
    return results


if __name__ == "__main__":
    main()
