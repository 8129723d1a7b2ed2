"""reward-model over moves: recovers a known rule from synthetic calls and picks, held out by
call, with readable weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainers.moves.reward_model import FEATURE_NAMES, run, sequence_features
from trainers.moves.simulator import MOVES

RULE = "order:reassure<propose_viewing"


def _rule_score(moves: list[str]) -> float:
    """The hidden truth: reassuring before proposing the viewing wins; proposing without it
    loses."""
    features = sequence_features(moves)
    return (
        2.0 * features[FEATURE_NAMES.index(RULE)]
        - 1.5 * features[FEATURE_NAMES.index("order:propose_viewing_unreassured")]
    )


def _sequence(rng: np.random.Generator) -> list[str]:
    return [str(move) for move in rng.choice(MOVES, size=6)]


def _outcomes(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    examples = []
    for index in range(n):
        moves = _sequence(rng)
        won = rng.random() < 1.0 / (1.0 + np.exp(0.5 - _rule_score(moves)))
        examples.append({"id": f"call-{index}", "moves": moves, "won": bool(won)})
    return examples


def _picks(n_calls: int, seed: int) -> list[dict]:
    """Three picks per call, so holding out by call matters."""
    rng = np.random.default_rng(seed)
    examples = []
    for call in range(n_calls):
        for pick in range(3):
            a, b = _sequence(rng), _sequence(rng)
            margin = 2.0 * (_rule_score(a) - _rule_score(b))
            examples.append(
                {
                    "id": f"pick-{call}-{pick}",
                    "group": f"call-{call}",
                    "sequence_a": a,
                    "sequence_b": b,
                    "a_preferred": bool(rng.random() < 1.0 / (1.0 + np.exp(-margin))),
                }
            )
    return examples


@pytest.fixture(scope="module")
def outcome_run() -> dict:
    return run(
        {
            "algorithm": "reward-model",
            "source": "outcomes",
            "examples": _outcomes(800, seed=0),
            "knobs": {"holdout_fraction": 0.2},
            "scenarios": ["family-relocating"],
            "seed": 0,
        }
    )


def test_it_recovers_the_rule_from_outcomes_above_chance(outcome_run):
    assert outcome_run["held_out"]["n"] == 160
    assert outcome_run["held_out"]["auc"] > 0.65
    assert outcome_run["held_out"]["accuracy"] > 0.6
    top = outcome_run["weights"][0]
    assert top["feature"] == RULE
    assert top["weight"] > 0
    assert top["help"]


def test_it_holds_out_whole_calls(outcome_run):
    train, held = set(outcome_run["train_ids"]), set(outcome_run["held_out_ids"])
    assert train.isdisjoint(held)
    assert len(train) + len(held) == 800


def test_it_fits_picks_with_bradley_terry_held_out_by_call():
    examples = _picks(200, seed=1)
    group_of = {example["id"]: example["group"] for example in examples}
    result = run(
        {
            "source": "picks",
            "examples": examples,
            "knobs": {"holdout_fraction": 0.2, "plan_strategy": False},
            "seed": 0,
        }
    )
    assert result["held_out"]["auc"] > 0.65
    assert result["held_out"]["accuracy"] > 0.6
    held_groups = set(result["held_out_groups"])
    train_groups = {group_of[identifier] for identifier in result["train_ids"]}
    assert held_groups
    assert held_groups.isdisjoint(train_groups)
    assert result["bias"] == 0.0  # a pick has no side to favour
    assert "strategy" not in result


def test_it_plans_a_strategy_with_the_learned_reward(outcome_run):
    assert outcome_run["strategy"]["kind"] == "table"
    report = outcome_run["scenarios"][0]
    assert report["learned_return"] <= report["optimal_return"] + 1e-9
    assert json.loads(json.dumps(outcome_run)) == outcome_run


def test_it_reads_moves_from_labelled_real_calls():
    calls = [
        {
            "id": f"c{index}",
            "outcome": "won" if index % 2 else "lost",
            "turns": [
                {"speaker": "agent", "text": "Hello, how are you today?"},
                {"speaker": "customer", "text": "Fine thanks."},
                {"speaker": "agent", "text": "Would you like to arrange a viewing?", "move": ""},
            ],
        }
        for index in range(20)
    ]
    result = run(
        {"source": "outcomes", "examples": calls, "knobs": {"plan_strategy": False, "epochs": 5}}
    )
    assert result["held_out"]["n"] == 2
    assert {w["feature"] for w in result["weights"]} == set(FEATURE_NAMES)
