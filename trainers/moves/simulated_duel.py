"""A duel of two move strategies on the simulator: the ground truth of a simulated world.

Both versions play the same seeded scripted customers (common random numbers): episode i of
a scenario draws the same uniform numbers, turn by turn, whichever version plays it, so the
two returns of an episode differ only by the moves. The figures are each version's won share
and mean return, and the paired difference of each (candidate less baseline, episode by
episode) with a percentile bootstrap interval; the verdict rests on the won-share difference.

The episodes are spread evenly over the scenarios (the first ones take the remainder), and
the bootstrap resamples episodes within each scenario, so every resample keeps the scenario
mix the duel was designed with. Customers and bootstrap have separate seeds: a new bootstrap
seed moves the interval, never the calls.

Headless: ``python -m trainers.moves.simulated_duel --spec spec.json`` with {"candidate",
"baseline" (move strategies; absent: the scripted v1), "scenarios" (slugs or objects; absent:
the default six), "seed", "episodes", "bootstrap_seed", "max_turns"}.

Pure Python + numpy; never imports Django. Returns plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.moves.common import max_turns_from_spec, scenarios_from_spec
from trainers.moves.simulator import DEFAULT_MAX_TURNS, LettingsWorld, Scenario, simulate_returns
from trainers.moves.strategy import SCRIPTED, strategy_policy_array
from trainers.runtime import Progress, silent_progress, trainer_main
from trainers.stats.intervals import percentile_interval, stratified_bootstrap_means, verdict

DEFAULT_EPISODES = 1000
"""Episodes each version plays, spread over the scenarios."""
BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95

SIDES = ("candidate", "baseline")


def episodes_per_scenario(episodes: int, scenarios: int) -> list[int]:
    """`episodes` spread over `scenarios` as evenly as whole numbers allow."""
    share, remainder = divmod(episodes, scenarios)
    return [share + (1 if index < remainder else 0) for index in range(scenarios)]


def customer_seed(seed: int, scenario: Scenario) -> int:
    """The seed of one scenario's customers: both versions play it, and it does not depend
    on which other scenarios share the duel, or in which order."""
    return int(np.random.SeedSequence([seed, scenario.seed]).generate_state(1)[0])


def _policy(
    strategy: Mapping[str, Any], *, side: str, world: LettingsWorld, scenario: Scenario
) -> np.ndarray:
    """The strategy's move per state of this scenario's world; a table for a shorter horizon
    (or none for the scenario) is refused, naming the side."""
    try:
        policy = strategy_policy_array(strategy, scenario=scenario.slug, max_turns=world.max_turns)
    except (ValueError, IndexError) as error:
        raise ValueError(
            f"the {side}'s move strategy cannot play {scenario.slug}: {error}"
        ) from error
    if len(policy) < world.n_states:
        raise ValueError(
            f"the {side}'s move table covers {len(policy)} states; a call of "
            f"{world.max_turns} turns has {world.n_states}"
        )
    return policy


def verdict_of_difference(low: float, high: float) -> str:
    """ "won" when the whole interval is above 0, "lost" when below it, else "even"."""
    return verdict(low, high, chance=0.0)


def _figures(won: np.ndarray, returns: np.ndarray) -> dict[str, float]:
    return {
        "won_share": round(float(won.mean()), 4),
        "mean_return": round(float(returns.mean()), 4),
    }


def _check_duel(
    scenarios: Sequence[Scenario], episodes: int, samples: int, confidence: float
) -> None:
    if not scenarios:
        raise ValueError("a simulated duel needs at least one scenario")
    if episodes < len(scenarios):
        raise ValueError(
            f"episodes must be at least the number of scenarios ({len(scenarios)}); got {episodes}"
        )
    if samples < 1 or not 0.0 < confidence < 1.0:
        raise ValueError("samples must be >= 1 and confidence in (0, 1)")


@dataclass(frozen=True)
class _Played:
    """Both sides' calls, episode by episode in scenario order, and the per-scenario rows."""

    won: dict[str, np.ndarray]
    returns: dict[str, np.ndarray]
    rows: list[dict[str, Any]]


def _play_both_sides(
    strategies: Mapping[str, Mapping[str, Any]],
    scenarios: Sequence[Scenario],
    counts: Sequence[int],
    *,
    seed: int,
    max_turns: int,
) -> _Played:
    """Both versions on the same customers, one scenario at a time."""
    won: dict[str, list[np.ndarray]] = {side: [] for side in SIDES}
    returns: dict[str, list[np.ndarray]] = {side: [] for side in SIDES}
    rows = []
    for scenario, count in zip(scenarios, counts, strict=True):
        world = LettingsWorld(scenario.persona, max_turns=max_turns)
        customers = customer_seed(seed, scenario)
        row: dict[str, Any] = {"slug": scenario.slug, "name": scenario.name, "episodes": count}
        for side in SIDES:
            policy = _policy(strategies[side], side=side, world=world, scenario=scenario)
            side_returns, side_won = simulate_returns(
                world, policy, n_episodes=count, seed=customers
            )
            won[side].append(side_won)
            returns[side].append(side_returns)
            row[side] = _figures(side_won, side_returns)
        rows.append(row)
    return _Played(
        won={side: np.concatenate(won[side]).astype(np.float64) for side in SIDES},
        returns={side: np.concatenate(returns[side]) for side in SIDES},
        rows=rows,
    )


def simulated_duel(
    candidate: Mapping[str, Any] | None,
    baseline: Mapping[str, Any] | None,
    *,
    scenarios: Sequence[Scenario],
    seed: int = 0,
    episodes: int = DEFAULT_EPISODES,
    bootstrap_seed: int | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    confidence: float = CONFIDENCE,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> dict[str, Any]:
    """Play `episodes` seeded customers with each move strategy (None: the scripted v1),
    the same customers for both, and compare them (see the module docstring).

    `seed` draws the customers, `bootstrap_seed` (default: `seed`) the resamples. Raises
    ValueError when a strategy cannot play a scenario or the arguments say nothing."""
    _check_duel(scenarios, episodes, samples, confidence)
    strategies = {"candidate": candidate or SCRIPTED, "baseline": baseline or SCRIPTED}
    counts = episodes_per_scenario(episodes, len(scenarios))
    played = _play_both_sides(strategies, scenarios, counts, seed=seed, max_turns=max_turns)

    # --- paired differences, episode by episode, and their bootstrap intervals ---
    won_difference = played.won["candidate"] - played.won["baseline"]
    return_difference = played.returns["candidate"] - played.returns["baseline"]
    rng = np.random.default_rng(seed if bootstrap_seed is None else bootstrap_seed)
    # Each scenario's episodes resampled within it: every resample keeps the duel's mix.
    won_means, return_means = stratified_bootstrap_means(
        [won_difference, return_difference], counts, samples=samples, rng=rng
    )
    won_interval = percentile_interval(won_means, confidence=confidence)
    return_interval = percentile_interval(return_means, confidence=confidence)

    return {
        "episodes": episodes,
        "scenario_count": len(scenarios),
        "max_turns": max_turns,
        "seed": seed,
        "bootstrap_seed": seed if bootstrap_seed is None else bootstrap_seed,
        "bootstrap_samples": samples,
        "ci_level": confidence,
        "candidate": _figures(played.won["candidate"], played.returns["candidate"]),
        "baseline": _figures(played.won["baseline"], played.returns["baseline"]),
        "won_share_difference": round(float(won_difference.mean()), 4),
        "won_share_difference_ci": won_interval,
        "return_difference": round(float(return_difference.mean()), 4),
        "return_difference_ci": return_interval,
        # Calls one version won and the other lost: where the difference comes from.
        "candidate_only_won": int((won_difference > 0).sum()),
        "baseline_only_won": int((won_difference < 0).sum()),
        "verdict": verdict_of_difference(*won_interval),
        "scenarios": played.rows,
    }


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """The duel a spec names (see the module docstring)."""
    bootstrap_seed = spec.get("bootstrap_seed")
    result = simulated_duel(
        spec.get("candidate"),
        spec.get("baseline"),
        scenarios=scenarios_from_spec(spec),
        seed=int(spec.get("seed") or 0),
        episodes=int(spec.get("episodes") or DEFAULT_EPISODES),
        bootstrap_seed=None if bootstrap_seed is None else int(bootstrap_seed),
        max_turns=max_turns_from_spec(spec),
    )
    progress(1, 1, stage="done")
    return result


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description="simulated duel: two move strategies, same calls")


if __name__ == "__main__":
    raise SystemExit(main())
