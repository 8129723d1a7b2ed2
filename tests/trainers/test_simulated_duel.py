"""The simulated duel: both move strategies on the same seeded customers, the paired
differences with their bootstrap intervals, and the verdict they give."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from trainers.moves.common import table_strategy
from trainers.moves.simulated_duel import episodes_per_scenario, simulated_duel
from trainers.moves.simulator import (
    DEFAULT_DYNAMICS,
    DEFAULT_MAX_TURNS,
    DEFAULT_SCENARIOS,
    MOVES,
    LettingsWorld,
    n_states_for,
)
from trainers.moves.strategy import SCRIPTED, strategy_policy_array
from trainers.moves.value_iteration import policy_return, solve_world

STATES = n_states_for(DEFAULT_MAX_TURNS)


@pytest.fixture(scope="module")
def optimal() -> dict:
    """The exact optimum of every default scenario (value iteration), as a table strategy."""
    tables = {
        scenario.slug: solve_world(LettingsWorld(scenario.persona)).policy
        for scenario in DEFAULT_SCENARIOS
    }
    return table_strategy(tables[DEFAULT_SCENARIOS[0].slug], tables)


def _fixed(move: str) -> dict:
    """A poor fixed script: the same move whatever the customer says."""
    return {"kind": "table", "default": [move] * STATES}


def _without_scenarios(result: dict) -> dict:
    return {key: value for key, value in result.items() if key != "scenarios"}


def test_it_gives_the_optimum_a_lead_whose_interval_is_above_zero(optimal):
    for poor in (SCRIPTED, _fixed("propose_viewing")):
        duel = simulated_duel(optimal, poor, scenarios=DEFAULT_SCENARIOS, seed=3)
        assert duel["won_share_difference"] > 0
        assert duel["won_share_difference_ci"][0] > 0
        assert duel["return_difference"] > 0
        assert duel["return_difference_ci"][0] > 0
        assert duel["verdict"] == "won"
        low, high = duel["won_share_difference_ci"]
        assert low <= duel["won_share_difference"] <= high


def test_it_gives_the_same_difference_negated_with_the_sides_swapped(optimal):
    ahead = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS)
    behind = simulated_duel(SCRIPTED, optimal, scenarios=DEFAULT_SCENARIOS)
    # The same customers, whoever is called the candidate.
    assert behind["candidate"] == ahead["baseline"]
    assert behind["baseline"] == ahead["candidate"]
    assert behind["won_share_difference"] == pytest.approx(-ahead["won_share_difference"])
    assert behind["won_share_difference_ci"][1] < 0
    assert behind["verdict"] == "lost"
    assert behind["candidate_only_won"] == ahead["baseline_only_won"]


def test_it_plays_both_versions_on_the_same_customers():
    """A strategy against itself: every call turns out the same for both, which independent
    draws would not give (the scripted v1 wins about half its calls)."""
    duel = simulated_duel(SCRIPTED, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=5)
    assert 0.2 < duel["candidate"]["won_share"] < 0.8
    assert duel["won_share_difference"] == 0.0
    assert duel["won_share_difference_ci"] == [0.0, 0.0]
    assert duel["return_difference_ci"] == [0.0, 0.0]
    assert duel["candidate_only_won"] == duel["baseline_only_won"] == 0
    assert duel["verdict"] == "even"


def test_it_gives_identical_results_for_identical_seeds(optimal):
    first = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=11)
    second = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=11)
    assert first == second
    json.dumps(first)  # plain values only
    other_customers = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=12)
    assert other_customers["scenarios"] != first["scenarios"]
    # The bootstrap seed moves the interval only, never the calls.
    other_bootstrap = simulated_duel(
        optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=11, bootstrap_seed=99
    )
    assert other_bootstrap["scenarios"] == first["scenarios"]
    assert other_bootstrap["won_share_difference"] == first["won_share_difference"]
    assert other_bootstrap["won_share_difference_ci"] != first["won_share_difference_ci"]


def test_its_mean_return_is_the_exact_expected_return_within_sampling_error(optimal):
    """The simulated calls are the world's own model: each version's mean return over the
    duel's episodes is the episode-weighted exact return, within four standard errors."""
    episodes = 60_000
    duel = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=episodes)
    # A call's return lies between every turn pushy and a win on the first turn, so its
    # standard deviation is at most half that range (Popoviciu).
    dynamics = DEFAULT_DYNAMICS
    lowest = -DEFAULT_MAX_TURNS * (dynamics.turn_cost + dynamics.pushy_penalty)
    highest = dynamics.won_reward - dynamics.turn_cost
    standard_error = (highest - lowest) / 2 / np.sqrt(episodes)
    assert 4 * standard_error < 0.2  # tight enough to tell the optimum from v1 (~0.6 apart)
    for side, strategy in (("candidate", optimal), ("baseline", SCRIPTED)):
        exact = 0.0
        for scenario, row in zip(DEFAULT_SCENARIOS, duel["scenarios"], strict=True):
            world = LettingsWorld(scenario.persona)
            policy = strategy_policy_array(
                strategy, scenario=scenario.slug, max_turns=DEFAULT_MAX_TURNS
            )
            exact += row["episodes"] * policy_return(world, policy)
        exact /= episodes
        assert abs(duel[side]["mean_return"] - exact) < 4 * standard_error, side


def test_it_spreads_the_episodes_over_the_scenarios(optimal):
    assert episodes_per_scenario(1000, 6) == [167, 167, 167, 167, 166, 166]
    duel = simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS)
    assert duel["episodes"] == 1000
    assert [row["slug"] for row in duel["scenarios"]] == [s.slug for s in DEFAULT_SCENARIOS]
    assert sum(row["episodes"] for row in duel["scenarios"]) == 1000
    shares = [row["candidate"]["won_share"] * row["episodes"] for row in duel["scenarios"]]
    assert duel["candidate"]["won_share"] == pytest.approx(sum(shares) / 1000, abs=1e-4)


def test_it_refuses_a_table_it_cannot_play():
    short = {"kind": "table", "default": [MOVES[0]] * n_states_for(4)}
    with pytest.raises(ValueError, match="candidate's move table covers"):
        simulated_duel(short, SCRIPTED, scenarios=DEFAULT_SCENARIOS)
    with pytest.raises(ValueError, match="at least one scenario"):
        simulated_duel(SCRIPTED, SCRIPTED, scenarios=[])
    with pytest.raises(ValueError, match="episodes must be at least"):
        simulated_duel(SCRIPTED, SCRIPTED, scenarios=DEFAULT_SCENARIOS, episodes=3)


def test_it_plays_two_thousand_calls_well_under_a_second(optimal):
    simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS)  # worlds built and cached
    started = time.perf_counter()
    simulated_duel(optimal, SCRIPTED, scenarios=DEFAULT_SCENARIOS, seed=1)
    assert time.perf_counter() - started < 0.5


def test_it_runs_headless_from_a_spec_of_plain_values(tmp_path, capsys):
    from trainers.moves.simulated_duel import main, run

    spec = {"candidate": _fixed("offer_slot"), "scenarios": ["family-relocating"], "episodes": 300}
    result = run(spec)
    assert result["episodes"] == 300
    assert [row["slug"] for row in result["scenarios"]] == ["family-relocating"]
    # Offering a slot before any viewing is agreed never wins: worse than v1's checklist.
    assert result["candidate"]["won_share"] == 0.0
    assert result["verdict"] == "lost"
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["--spec", str(path), "--out", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text()) == result
    path.write_text(json.dumps({**spec, "scenarios": ["nobody"]}))
    assert main(["--spec", str(path)]) == 2
    assert "unknown scenario" in capsys.readouterr().err
