"""Off-line comparison: agreement with the real agent's moves on won and on lost calls, worked
out by hand on four calls against the scripted v1 rules."""

from __future__ import annotations

import pytest

from trainers.moves.offline_comparison import offline_agreement, walk_call
from trainers.moves.simulator import n_states_for

SCRIPTED = {"kind": "scripted"}


def _agent(move: str, text: str = "...") -> dict:
    return {"speaker": "agent", "text": text, "move": move}


def _customer(text: str) -> dict:
    return {"speaker": "customer", "text": text}


# Scripted v1 picks: greet at the opening; handle_objection while one is open; offer_slot
# once a viewing is agreed; with interest and trust >= 1, propose_viewing; reassure while
# trust is 0.
CALLS = [
    {  # won, 3 of 3: greet, propose_viewing (trust 1 after the greeting), offer_slot
        "outcome": "won",
        "turns": [
            _customer("Hi, I saw the flat on your site."),
            _agent("greet"),
            _customer("Sounds lovely."),
            _agent("propose_viewing"),
            _customer("Yes please."),
            _agent("offer_slot"),
        ],
    },
    {  # won, 2 of 2: greet, then the price objection is open -> handle_objection
        "outcome": "won",
        "turns": [
            _customer("Hello."),
            _agent("greet"),
            _customer("Hmm, that's a bit pricey for me, to be honest."),
            _agent("handle_objection"),
        ],
    },
    {  # lost, 0 of 2: details at the opening (v1 greets); close with trust 0 (v1 reassures)
        "outcome": "lost",
        "turns": [
            _customer("Hi."),
            _agent("give_details"),
            _customer("Okay."),
            _agent("close"),
        ],
    },
    {  # lost, 1 of 2: greet; then a family worry is open and the agent pushes the viewing
        "outcome": "lost",
        "turns": [
            _agent("greet"),
            _customer("I need to be sure the area is right for my family."),
            _agent("propose_viewing"),
        ],
    },
    {"outcome": "", "turns": [_agent("close")]},  # unlabelled: not counted
]


def test_it_counts_agreement_on_won_and_lost_calls():
    result = offline_agreement(SCRIPTED, CALLS)
    assert result["won"] == {"agree": 5, "total": 5, "rate": 1.0}
    assert result["lost"] == {"agree": 1, "total": 4, "rate": 0.25}
    assert result["difference"] == pytest.approx(0.75)
    assert result["calls"] == {"won": 2, "lost": 2}


def test_it_compares_only_within_the_strategys_horizon():
    result = offline_agreement(SCRIPTED, CALLS[:1], max_turns=2)
    assert result["won"]["total"] == 2
    assert result["lost"]["rate"] is None
    assert result["difference"] is None


def test_it_uses_the_calls_scenario_table():
    size = n_states_for(8)
    strategy = {
        "kind": "table",
        "default": ["close"] * size,
        "tables": {"family-relocating": ["greet"] * size},
    }
    call = {"outcome": "won", "turns": [_agent("greet")]}
    assert offline_agreement(strategy, [call])["won"]["agree"] == 0
    assert (
        offline_agreement(strategy, [{**call, "scenario": "family-relocating"}])["won"]["agree"]
        == 1
    )


def test_it_labels_unlabelled_turns_and_reads_the_state_off_the_call():
    points = walk_call(
        [
            {"speaker": "agent", "text": "Good afternoon, how may I help?"},
            {"speaker": "customer", "text": "The rent is rather more than I had hoped to pay."},
            {"speaker": "agent", "text": "I understand your concern; bills are included."},
        ]
    )
    assert [point["move"] for point in points] == ["greet", "handle_objection"]
    assert points[0]["stage"] == "opening"
    assert points[1]["objection_status"] == "open"
    assert points[1]["trust"] == 1
