"""Move labels: hand-written lines for every move, the simulator's own scripted lines, and real
persuasion calls."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from arena.moves import GENERIC_MOVES
from levers9.shipped_data import PERSUASION_CALLS
from trainers.moves.labels import (
    MOVE_RULES,
    customer_objection,
    fit_world_labeller,
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


# --- Issue 40: an opening move only near the call's start, and the world's own moves --------

MARKETPLACE_MOVES = [
    {"name": "welcome", "description": "Say hello to the buyer and that the item is available."},
    {
        "name": "describe_item",
        "description": "Describe the item: condition, age, what comes with it.",
    },
    {"name": "ask_what_they_need", "description": "Ask what the buyer wants it for."},
    {"name": "negotiate_price", "description": "Counter the buyer's offer or name a price."},
    {"name": "reassure", "description": "Put the buyer at ease: no faults, honest seller."},
    {"name": "arrange_pickup", "description": "Agree when and where the buyer collects it."},
    {"name": "wrap_up", "description": "Thank the buyer and say goodbye."},
]
BIKE_CALL = [
    {"speaker": "customer", "text": "Is the bike still for sale?"},
    {"speaker": "agent", "text": "Hi, how are you? Yes it is."},
    {"speaker": "customer", "text": "Would you take 140?"},
    {"speaker": "agent", "text": "I could go to 170."},
    {"speaker": "customer", "text": "150 and I pick it up today."},
    {"speaker": "agent", "text": "$160 even and you have a deal"},
    {"speaker": "customer", "text": "OK."},
    {"speaker": "agent", "text": "Great."},
]


@pytest.mark.parametrize(
    "moves", [MARKETPLACE_MOVES, [dict(move) for move in GENERIC_MOVES]], ids=["own", "generic"]
)
def test_it_gives_the_opening_move_to_the_first_hello_and_never_to_a_deal_mid_call(moves):
    labeller = fit_world_labeller(moves)
    opening = moves[0]["name"]
    labels = [label for label in labeller.label_turns(BIKE_CALL) if label is not None]
    assert labels[0][0] == opening  # "Hi, how are you? Yes it is."
    assert labels[2][0] != opening  # "$160 even and you have a deal"
    assert labels[3][0] != opening  # "Great.": no words of an opening, far from the start
    assert label_move(BIKE_CALL[:5], BIKE_CALL[5]["text"])[0] == "offer_slot"


def test_it_still_gives_the_opening_move_mid_call_when_the_words_say_so():
    labeller = fit_world_labeller(MARKETPLACE_MOVES)
    late_hello = [*BIKE_CALL, {"speaker": "customer", "text": "Sorry, I'm back."}]
    assert labeller.label(late_hello, "Hello again, nice to meet you!")[0] == "welcome"


def test_it_labels_with_the_worlds_own_names_and_never_maps_a_step_onto_the_opening():
    labeller = fit_world_labeller(MARKETPLACE_MOVES)
    call = [
        {"speaker": "agent", "text": "Hello! Yes, still available."},
        {"speaker": "customer", "text": "What can you tell me about it?"},
    ]
    described = labeller.label(call, "It's in great condition, barely ridden, comes with a lock.")
    assert described[0] == "describe_item"
    assert labeller.label(BIKE_CALL[:5], BIKE_CALL[5]["text"])[0] == "negotiate_price"
    assert labeller.label(call, "I can do Saturday at 11am at my place.")[0] == "arrange_pickup"
    # No labelling rule but the greeting's lands on the opening move.
    rule_moves = labeller.rule_move
    assert "welcome" not in {
        move for index, move in rule_moves.items() if MOVE_RULES[index].move != "greet"
    }


def test_the_shipped_calls_rarely_get_an_opening_move_past_the_opening():
    """On 200 shipped calls, the opening move is almost never given past an agent's third
    turn (where only a real greeting's words may earn it), in the generic world and in one
    whose moves a manager named."""
    from arena.moves import generic_moves

    worlds = [
        generic_moves(),
        [
            {"name": "hello", "description": "Say hi and build rapport."},
            {"name": "pitch", "description": "Explain what the charity does for children."},
            {"name": "ask_for_donation", "description": "Ask them to donate part of their bonus."},
            {"name": "thanks", "description": "Thank them and say goodbye."},
        ],
    ]
    with PERSUASION_CALLS.open() as lines:
        calls = [json.loads(next(lines)) for _ in range(200)]
    for moves in worlds:
        labeller = fit_world_labeller(moves)
        late = opening = 0
        for call in calls:
            agent_labels = [label for label in labeller.label_turns(call["turns"]) if label]
            late += len(agent_labels[3:])
            opening += sum(label[0] == moves[0]["name"] for label in agent_labels[3:])
        assert late > 1000
        assert opening / late < 0.01, (moves[0]["name"], opening, late)
