"""How fast Evaluate's simulated duel runs, and what it says about known strategies.

    python -m bench.simulated_duel [--episodes 1000] [--repeats 20] [--no-q-learning]

The duel (trainers.moves.simulated_duel) plays two move strategies on the same seeded customers of
the six default scenarios and compares them by the paired difference in won share and return.
Timed on ONE core: the duel of 2 x `episodes` calls (worlds cold, then warm, best of
`repeats`), and the calls per second of a long duel. Then the figures of the exact optimum
(value iteration per scenario) against the scripted v1 and against a poor fixed script, and of
a Q-learned strategy (the Train card's run: default knobs, all six scenarios) against v1.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

# First of the project's imports: one BLAS thread, set before numpy loads.
from bench.one_core import pin_to_one_core
from trainers.moves import q_learning
from trainers.moves.common import table_strategy
from trainers.moves.simulated_duel import simulated_duel
from trainers.moves.simulator import (
    DEFAULT_MAX_TURNS,
    DEFAULT_SCENARIOS,
    LettingsWorld,
    n_states_for,
)
from trainers.moves.strategy import SCRIPTED
from trainers.moves.value_iteration import solve_world

LONG_DUEL_EPISODES = 200_000


def optimal_strategy() -> dict[str, Any]:
    tables = {
        scenario.slug: solve_world(LettingsWorld(scenario.persona)).policy
        for scenario in DEFAULT_SCENARIOS
    }
    return table_strategy(tables[DEFAULT_SCENARIOS[0].slug], tables)


def _line(name: str, duel: dict[str, Any]) -> str:
    won_low, won_high = duel["won_share_difference_ci"]
    return_low, return_high = duel["return_difference_ci"]
    return (
        f"{name:<28} won {duel['candidate']['won_share']:.3f} vs "
        f"{duel['baseline']['won_share']:.3f}  "
        f"diff {duel['won_share_difference'] * 100:+5.1f} pts "
        f"[{won_low * 100:+5.1f}, {won_high * 100:+5.1f}]  "
        f"return {duel['candidate']['mean_return']:.2f} vs {duel['baseline']['mean_return']:.2f} "
        f"diff {duel['return_difference']:+.2f} [{return_low:+.2f}, {return_high:+.2f}]  "
        f"{duel['verdict']}"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-q-learning", action="store_true")
    args = parser.parse_args(argv)
    print(pin_to_one_core())

    optimal = optimal_strategy()

    # --- speed ---
    started = time.perf_counter()
    simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes)
    first = time.perf_counter() - started
    timings = []
    for repeat in range(args.repeats):
        started = time.perf_counter()
        simulated_duel(
            optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes, seed=repeat
        )
        timings.append(time.perf_counter() - started)
    best = min(timings)
    # One resample: the play alone (the bootstrap's 2,000 resamples dominate a long duel).
    started = time.perf_counter()
    simulated_duel(
        optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=LONG_DUEL_EPISODES, samples=1
    )
    long_seconds = time.perf_counter() - started
    calls_per_second = 2 * LONG_DUEL_EPISODES / long_seconds
    print(
        f"duel of 2 x {args.episodes:,} calls with its bootstrap: {first * 1000:.1f} ms the "
        f"first time, best of {args.repeats} {best * 1000:.1f} ms"
    )
    print(
        f"play alone, 2 x {LONG_DUEL_EPISODES:,} calls: {long_seconds:.2f} s, "
        f"{calls_per_second:,.0f} episodes/s ({calls_per_second * DEFAULT_MAX_TURNS:,.0f} "
        f"steps/s: every call takes {DEFAULT_MAX_TURNS} batch steps, finished ones inert)"
    )

    # --- figures ---
    results: dict[str, Any] = {"seconds": best, "episodes_per_second": calls_per_second}
    poor = {"kind": "table", "default": ["propose_viewing"] * n_states_for(DEFAULT_MAX_TURNS)}
    results["optimal_vs_scripted"] = simulated_duel(
        optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes
    )
    results["optimal_vs_fixed"] = simulated_duel(
        optimal, poor, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes
    )
    results["scripted_vs_scripted"] = simulated_duel(
        SCRIPTED, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes
    )
    print()
    print(_line("optimal vs scripted v1", results["optimal_vs_scripted"]))
    print(_line("optimal vs 'propose viewing'", results["optimal_vs_fixed"]))
    print(_line("scripted v1 vs itself", results["scripted_vs_scripted"]))
    if not args.no_q_learning:
        started = time.perf_counter()
        learned = q_learning.run({"seed": 0})
        learning_seconds = time.perf_counter() - started
        results["q_learned_vs_scripted"] = simulated_duel(
            learned["strategy"], SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=args.episodes
        )
        results["optimal_vs_q_learned"] = simulated_duel(
            optimal, learned["strategy"], scenarios=DEFAULT_SCENARIOS, episodes=args.episodes
        )
        print(_line("q-learned vs scripted v1", results["q_learned_vs_scripted"]))
        print(_line("optimal vs q-learned", results["optimal_vs_q_learned"]))
        print(
            f"(q-learning: {learning_seconds:.1f} s, mean fraction of the optimum "
            f"{learned['summary']['mean_fraction_of_optimum']:.3f})"
        )
    return results


if __name__ == "__main__":
    main()
