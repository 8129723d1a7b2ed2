"""Shared set-up for the Duel tests: a small real-calls world and reviewers."""

from __future__ import annotations

import json

from arena.models import World
from arena.services.calls import calls_import
from arena.services.worlds import world_create

REAL_CALLS = [
    {
        "id": f"call-{number}",
        "outcome": "won" if number % 2 else "lost",
        "turns": [
            # Each call's agent words differ, as real agents' do: in a world of recorded calls
            # the baseline answers with another call's reply (arena.recorded_replies).
            {"speaker": "agent", "text": f"Good morning, thank you for taking call {number}."},
            {"speaker": "customer", "text": "Hi, I'm not sure about this, it sounds expensive."},
            {"speaker": "agent", "text": f"Whatever. Just sign up now, {number} chances left!!"},
            {"speaker": "customer", "text": "I have two kids, we need to be careful with money."},
            {
                "speaker": "agent",
                "text": f"I understand, and any amount helps, even {number} dollars. "
                "Would you like to think about it?",
            },
            {"speaker": "customer", "text": "Maybe, tell me more."},
        ],
    }
    for number in range(1, 7)
]


def real_world(slug: str = "real") -> World:
    """A world with six real calls (run inside a workspace schema)."""
    world = world_create(slug=slug, name="Real calls")
    calls_import(world=world, text="\n".join(json.dumps(call) for call in REAL_CALLS))
    return world
