"""What the simulator adds to an evaluation on scripted customers: each simulated version's
return and won share over the held-out calls, played through on their seeds, and both
versions on the same 1,000 seeded customers (trainers.moves.simulated_duel), whose verdict is
the one wherever it could be played (evaluation.verdicts).

Workspace schema: the world's scenarios read here live in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from arena.models import World
from evaluation.call_sets import scripted_episode
from evaluation.models import Evaluation, HeldOutCall
from policies.models import PolicyVersion
from trainers.moves.simulated_duel import DEFAULT_EPISODES, simulated_duel
from trainers.moves.simulator import Scenario as SimulatedScenario
from trainers.moves.strategy import SCRIPTED

# The simulated duel's customers are fixed, like the held-out calls (the evaluation's seed
# moves only its bootstrap), so two evaluations of the same versions play the same calls.
SIMULATED_DUEL_SEED = 0
SIMULATED_DUEL_EPISODES = DEFAULT_EPISODES


def _version_returns(
    version: PolicyVersion, held_calls: list[HeldOutCall]
) -> dict[str, Any] | None:
    """One simulated version's return and won share over the held-out calls, played through
    on their seeds with its own move strategy; None when it could play none of them."""
    totals, won = [], 0
    for held in held_calls:
        try:
            _simulated, episode = scripted_episode(
                held.scenario, held.seed, version.move_strategy or SCRIPTED
            )
        except ValueError:
            continue  # a table for another horizon: nothing to play
        totals.append(episode.total_return)
        won += int(episode.won)
    if not totals:
        return None
    return {
        "mean_return": round(sum(totals) / len(totals), 4),
        "won_share": round(won / len(totals), 4),
        "calls": len(totals),
    }


def simulator_returns(
    evaluation: Evaluation, held_calls: list[HeldOutCall]
) -> dict[str, dict[str, Any]]:
    """On scripted customers: each simulated version plays every held-out call through on
    the same seed with its own move strategy, so the simulator's return and won share of
    the two can be compared. Model-backed versions have no moves to play: left out."""
    returns: dict[str, dict[str, Any]] = {}
    for side, version in (("candidate", evaluation.candidate), ("baseline", evaluation.baseline)):
        if version.provider != PolicyVersion.Provider.SIMULATOR:
            continue
        figures = _version_returns(version, held_calls)
        if figures is not None:
            returns[side] = figures
    return returns


def _world_scenarios(world: World) -> list[SimulatedScenario]:
    """The world's scripted customers as the simulator takes them."""
    return [
        SimulatedScenario.from_dict(
            {
                "slug": scenario.slug,
                "name": scenario.name,
                "persona": scenario.persona_dict(),
                "seed": scenario.seed,
            }
        )
        for scenario in world.scenarios.order_by("slug")
    ]


def simulator_duel(evaluation: Evaluation) -> dict[str, Any]:
    """Both versions on the same 1,000 seeded scripted customers of the world: the won share
    and return of each and their paired differences. A version that answers with a model has
    no moves to play, and a table the world cannot play is refused: {"unavailable": why}."""
    for version in (evaluation.candidate, evaluation.baseline):
        if version.provider != PolicyVersion.Provider.SIMULATOR:
            return {
                "unavailable": f"{version.label} answers with a model, not with moves the "
                "simulator can play"
            }
    scenarios = _world_scenarios(evaluation.world)
    if not scenarios:
        return {"unavailable": f"{evaluation.world.name} has no scripted customers"}
    try:
        return simulated_duel(
            evaluation.candidate.move_strategy or SCRIPTED,
            evaluation.baseline.move_strategy or SCRIPTED,
            scenarios=scenarios,
            seed=SIMULATED_DUEL_SEED,
            episodes=max(SIMULATED_DUEL_EPISODES, len(scenarios)),
            bootstrap_seed=evaluation.seed,
        )
    except ValueError as error:
        return {"unavailable": str(error)}
