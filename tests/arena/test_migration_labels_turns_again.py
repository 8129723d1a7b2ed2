"""Migration 0013 labels again the agent turns of calls imported under the old labeller, which
called most of a marketplace's turns "greet" (issue 40, point 4), and keeps a reviewer's
correction."""

from __future__ import annotations

import json

from arena.models import Turn
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from tests.migration_state import migrate_to, migrate_to_latest

MOVES = [
    {"name": "greet", "description": "Say hello and open the chat."},
    {"name": "describe_item", "description": "Describe the bike: condition, size, age."},
    {"name": "negotiate_price", "description": "Agree a price: offer, counter-offer, deal."},
    {"name": "arrange_pickup", "description": "Agree when and where to collect it."},
]
CALL = {
    "id": "bike-1",
    "outcome": "won",
    "turns": [
        {"speaker": "agent", "text": "Hi there, thanks for your message!"},
        {"speaker": "customer", "text": "Would you take 150 for it?"},
        {"speaker": "agent", "text": "$160 even and you have a deal."},
        {"speaker": "customer", "text": "OK, deal. When can I get it?"},
        {"speaker": "agent", "text": "You can collect it on Saturday morning at my place."},
    ],
}


def test_old_greet_labels_are_labelled_again_and_corrections_kept(in_workspace):
    world = world_create(slug="bikes", name="Second-hand bikes", moves=MOVES)
    calls_import(world=world, text=json.dumps(CALL))
    agent_turns = Turn.objects.filter(call__world=world, speaker="agent").order_by("index")
    # As the old labeller left them: every agent turn "greet"; the last one a reviewer's.
    agent_turns.update(move_label="greet", move_label_source="classifier")
    corrected = agent_turns.last()
    Turn.objects.filter(pk=corrected.pk).update(move_label="greet", move_label_source="reviewer")
    migrate_to([("arena", "0012_preference_versions_per_world")])
    migrate_to_latest()
    labels = dict(agent_turns.values_list("index", "move_label"))
    assert labels[0] == "greet"
    assert labels[2] != "greet"
    assert labels[2] in {move["name"] for move in MOVES}
    assert Turn.objects.get(pk=corrected.pk).move_label == "greet"  # the reviewer's, kept
