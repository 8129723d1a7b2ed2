"""The off-line move learner on labelled real calls, and its comparison on held-out calls."""

from __future__ import annotations

from trainers.moves.offline_comparison import comparison_trust, outcome_policy_comparison
from trainers.moves.offline_outcome import fit, outcome_choose_move, run

MOVES = ["greet", "ask", "inform", "propose_next_step", "close"]


def _calls(count: int, *, winning: str, losing: str) -> list[dict]:
    """Calls where the second move decides: `winning` after greet wins, `losing` loses."""
    calls = []
    for n in range(count):
        won = n % 2 == 0
        calls.append(
            {
                "id": f"c{n}",
                "won": won,
                "moves": ["greet", winning if won else losing, "close"],
            }
        )
    return calls


def test_it_prefers_the_move_that_won():
    result = fit(MOVES, _calls(40, winning="propose_next_step", losing="ask"))
    strategy = result["strategy"]
    assert strategy["kind"] == "outcome"
    assert outcome_choose_move(strategy, agent_turn=1, previous="greet") == "propose_next_step"
    swapped = fit(MOVES, _calls(40, winning="ask", losing="propose_next_step"))["strategy"]
    assert outcome_choose_move(swapped, agent_turn=1, previous="greet") == "ask"
    assert result["trained_on"] == {"calls": 40, "won": 20, "agent_turns": 120}
    assert "cross-validation" in result["cross_validation"]["chosen_by"]


def test_it_still_gives_a_strategy_with_no_calls():
    result = run({"algorithm": "offline-outcome", "moves": MOVES, "calls": []})
    assert result["strategy"]["default"] in MOVES
    assert result["trained_on"]["calls"] == 0
    assert outcome_choose_move(result["strategy"], agent_turn=3, previous="ask") in MOVES


def test_it_compares_on_held_out_calls_with_an_interval():
    strategy = fit(MOVES, _calls(40, winning="propose_next_step", losing="ask"))["strategy"]
    held_out = _calls(30, winning="propose_next_step", losing="ask")
    comparison = outcome_policy_comparison(strategy, held_out, seed=1)
    assert comparison["held_out_calls"] == 30
    assert comparison["agree"]["won_share"] == 1.0
    assert comparison["disagree"]["won_share"] == 0.0
    low, high = comparison["interval"]
    assert 0 < low <= high
    assert comparison_trust(comparison).startswith("supported")
    # A policy that prefers the losing move is contradicted by the same calls.
    wrong = fit(MOVES, _calls(40, winning="ask", losing="propose_next_step"))["strategy"]
    assert comparison_trust(outcome_policy_comparison(wrong, held_out)).startswith("contradicted")
    assert comparison_trust(outcome_policy_comparison(strategy, [])).startswith("not measured")
