"""Move labels: hand-written lines for every move, the simulator's own scripted lines, and real
persuasion calls."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from levers9.shipped_data import PERSUASION_CALLS
from trainers.moves.labels import (
    MOVE_RULES,
    customer_objection,
    label_agent_turns,
    label_move,
    move_rules_table,
)
from trainers.moves.simulator import DIALECTS, MOVES, scripted_reply

PITCHED = [{"speaker": "agent", "text": "The flat is £1,450 per month."}]


@pytest.mark.parametrize(
    ("context", "text", "move"),
    [
        ([], "Good morning! How are you doing today?", "greet"),
        (PITCHED, "It has two bedrooms and the rent includes broadband.", "give_details"),
        (PITCHED, "Just to confirm, you need two bedrooms, is that right?", "confirm"),
        (
            [{"speaker": "customer", "text": "Honestly it's too expensive for me."}],
            "I hear you. The landlord may take less for a longer let.",
            "handle_objection",
        ),
        (PITCHED, "Don't worry, the building is safe and well managed.", "reassure"),
        (PITCHED, "Would you like to come and see it this week?", "propose_viewing"),
        (PITCHED, "I can do Saturday at 11am or Monday at 6pm.", "offer_slot"),
        (PITCHED, "Lovely, you're booked in. See you then!", "close"),
        # persuasion analogues
        (PITCHED, "Save the Children works in 120 countries fighting hunger.", "give_details"),
        ([], "Have you ever heard of Save the Children?", "confirm"),
        (PITCHED, "Would you be willing to donate some of your earnings?", "propose_viewing"),
        (PITCHED, "Even $0.50 of your bonus would help.", "offer_slot"),
        (PITCHED, "Thank you so much for your generous donation!", "close"),
        (PITCHED, "Every penny goes directly to the children.", "reassure"),
        ([], "We're about to get hit by a tropical storm here.", "greet"),
    ],
)
def test_it_labels_hand_written_lines(context, text, move):
    label, reason = label_move(context, text)
    assert label == move
    assert reason


def test_it_labels_the_simulators_scripted_lines_as_their_own_move():
    for move in MOVES:
        for dialect in DIALECTS:
            context = [] if move == "greet" else PITCHED
            assert label_move(context, scripted_reply(move, dialect))[0] == move, (move, dialect)


def test_it_reads_customer_concerns():
    assert customer_objection("That's more than I wanted to spend, if I'm honest.") == "price"
    assert customer_objection("Not sure the dates line up with when I need to move.") == "timing"
    assert customer_objection("Is the area okay for a family, do you think?") == "family"
    assert customer_objection("I'm often skeptical of big charities like that.") == "trust"
    assert customer_objection("We are a family of four.") is None


def test_it_gives_every_agent_turn_of_real_calls_one_of_the_eight_moves():
    with PERSUASION_CALLS.open() as lines:
        calls = [json.loads(next(lines)) for _ in range(20)]
    moves: Counter[str] = Counter()
    for call in calls:
        labels = label_agent_turns(call["turns"])
        for turn, label in zip(call["turns"], labels, strict=True):
            assert (label is None) == (turn["speaker"] != "agent")
            if label is not None:
                assert label[0] in MOVES
                assert label[1]
                moves[label[0]] += 1
    assert len(moves) >= 5
    assert max(moves.values()) < sum(moves.values())


def test_it_lists_its_rules_for_the_admin():
    rows = move_rules_table()
    assert len(rows) == len(MOVE_RULES)
    assert {row["move"] for row in rows} == set(MOVES)
    assert all(row["reason"] and row["pattern"] for row in rows)


def test_agreement_holds_out_each_call_alone_when_a_hash_would_put_two_together():
    """'call-1' and 'call-4' hash to one fold of five: each is still labelled by a labeller
    that learned from the other's correction, not by one that learned from nothing."""
    from arena.moves import generic_moves
    from trainers.moves.labels import Correction, _fold_of, labeller_agreement

    assert _fold_of("call-1", 5) == _fold_of("call-4", 5)
    lines = {
        "call-1": "Our volunteers plant oak trees in the city park every weekend.",
        "call-4": "Volunteers plant new trees in the park each weekend.",
    }
    corrections = [
        Correction(call, ({"speaker": "customer", "text": "Tell me more."},), text, "reassure")
        for call, text in lines.items()
    ]
    agreement = labeller_agreement(generic_moves(), corrections)
    assert agreement["calls"] == 2
    assert agreement["accuracy_without_corrections"] == 0.0  # the words alone say otherwise
    assert agreement["accuracy"] == 1.0
