"""Recorded calls in the real-call import format, for tests that import a few."""

from __future__ import annotations

import itertools


def recorded_call(call_id: str, *lines: str, outcome: str = "won") -> dict:
    """A call whose turns are `lines`, the agent's and the customer's in turn, agent first."""
    speakers = itertools.cycle(("agent", "customer"))
    turns = [{"speaker": next(speakers), "text": line} for line in lines]
    return {"id": call_id, "outcome": outcome, "turns": turns}


def two_turn_call(call_id: str) -> dict:
    """A won call: the agent's greeting, then the customer asking about the flat on Elm Street."""
    return recorded_call(
        call_id, "Good morning, Acme Lettings.", "Hello, I saw the flat on Elm Street."
    )
