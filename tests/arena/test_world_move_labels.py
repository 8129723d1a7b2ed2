"""Move labels on real calls come from the world's own moves, and reviewers' corrections change
the labels given after them (with the labeller's agreement with them reported)."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from arena.models import DuelPair, Turn
from arena.services.calls import calls_import
from arena.services.move_labels import calls_label_moves, move_labels_agreement
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from tests.recorded_calls import recorded_call
from trainers.moves.simulator import MOVES

LETTINGS_ONLY = set(MOVES) - {"greet", "handle_objection", "reassure", "close"}

pytestmark = pytest.mark.usefixtures("in_workspace")


def _shared_calls(count: int) -> str:
    with PERSUASION_CALLS.open() as lines:
        return "".join(islice(lines, count))


def test_it_labels_a_donation_worlds_turns_with_its_own_moves():
    world = world_create(slug="donations", name="Donations")
    calls_import(world=world, text=_shared_calls(30))
    labels = list(
        Turn.objects.filter(call__world=world, speaker="agent").values_list(
            "move_label", "move_label_source"
        )
    )
    moves = {label for label, _source in labels}
    assert labels
    assert all(source == "classifier" for _label, source in labels)
    assert moves <= set(world.move_names)
    assert not moves & LETTINGS_ONLY
    assert len(moves) >= 4  # not one move for every turn


def test_it_labels_with_moves_a_manager_named():
    moves = [
        {"name": "hello", "description": "Say hi and build rapport."},
        {"name": "pitch", "description": "Explain what the charity does for children."},
        {"name": "ask_for_donation", "description": "Ask them to donate part of their bonus."},
        {"name": "thanks", "description": "Thank them and say goodbye."},
    ]
    world = world_create(slug="custom", name="Custom", moves=moves)
    calls_import(world=world, text=_shared_calls(10))
    used = set(
        Turn.objects.filter(call__world=world, speaker="agent").values_list("move_label", flat=True)
    )
    assert used <= {"hello", "pitch", "ask_for_donation", "thanks"}
    assert {"hello", "pitch"} <= used


def _call(call_id: str, line: str) -> dict:
    return recorded_call(call_id, "Hello, how are you today?", "Fine thanks.", line)


def test_it_changes_later_labels_after_corrections_and_reports_agreement():
    world = world_create(slug="parks", name="Parks")
    lines = [
        "Our volunteers plant oak trees in the city park every weekend.",
        "Volunteers plant new trees in the park each weekend.",
        "Every weekend our volunteers plant trees in parks across the city.",
    ]
    calls_import(
        world=world,
        text="\n".join(json.dumps(_call(f"c{n}", line)) for n, line in enumerate(lines)),
    )
    turns = {
        turn.call.external_id: turn
        for turn in Turn.objects.filter(call__world=world, index=2).select_related("call")
    }
    before = turns["c2"].move_label
    assert before != "reassure"
    assert move_labels_agreement(world=world)["accuracy"] is None  # no corrections yet
    for call_id in ("c0", "c1"):  # what the admin writes for a reviewer's correction
        Turn.objects.filter(pk=turns[call_id].pk).update(
            move_label="reassure", move_label_source="reviewer"
        )
    assert calls_label_moves(world=world) >= 1
    turns["c2"].refresh_from_db()
    assert (turns["c2"].move_label, turns["c2"].move_label_source) == ("reassure", "classifier")
    turns["c0"].refresh_from_db()
    assert (turns["c0"].move_label, turns["c0"].move_label_source) == ("reassure", "reviewer")
    agreement = move_labels_agreement(world=world)
    assert agreement["corrected_turns"] == 2
    assert agreement["calls"] == 2
    # Each correction is predicted from the other call's (held out by call) ...
    assert agreement["accuracy"] == 1.0
    # ... where the descriptions and cue words alone did not give it.
    assert agreement["accuracy_without_corrections"] == 0.0


def test_the_duels_pairs_and_map_carry_the_worlds_moves():
    world = world_create(slug="donations", name="Donations")
    calls_import(world=world, text=_shared_calls(12))
    assert duel_pairs_generate(world=world, count=8) > 0
    seen = set()
    for pair in DuelPair.objects.filter(world=world):
        seen |= {pair.move_a, pair.move_b, pair.previous_move}
    seen.discard("")
    assert seen
    assert seen <= set(world.move_names)
    assert not seen & LETTINGS_ONLY


def test_an_imported_sellers_chat_gives_the_opening_move_to_its_hello_only():
    """Issue 40: a second-hand seller's chat, imported into a world with the generic moves,
    had "$160 even and you have a deal" labelled greet (no words of the lettings or charity
    pitch, so the whole chat counted as small talk)."""
    world = world_create(slug="bikes", name="Bikes")
    call = recorded_call(
        "bike-1",
        "Hi, how are you? Yes, the bike is still for sale.",
        "Would you take 140?",
        "I could go to 170.",
        "150 and I pick it up today.",
        "$160 even and you have a deal",
        "OK.",
        "Great.",
    )
    calls_import(world=world, text=json.dumps(call))
    labels = list(
        Turn.objects.filter(call__world=world, speaker="agent")
        .order_by("index")
        .values_list("move_label", flat=True)
    )
    assert set(labels) <= set(world.move_names)
    assert labels[0] == "greet"
    assert "greet" not in labels[1:]
    assert labels[2] == "propose_next_step"
