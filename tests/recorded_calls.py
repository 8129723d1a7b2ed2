"""Recorded calls in the real-call import format, for tests that import a few."""

from __future__ import annotations

import itertools
from pathlib import Path

from levers9.shipped_data import PERSUASION_CALLS


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


def real_calls_world_fitted(capture_on_commit_callbacks):
    """Inside a workspace's schema: a world of the shared real calls (forty held out and forty
    to learn from besides), its judge fitted on them as the worker would fit it. Takes pytest's
    `django_capture_on_commit_callbacks`, so the fit's own start queues nothing."""
    import json

    from arena.held_out import HELD_OUT_CALLS
    from arena.judge.fit_job import judge_fit_finish, judge_fit_start
    from arena.services.calls import calls_import
    from arena.services.worlds import world_create
    from trainers.judge import fit as judge_fit

    world = world_create(slug="persuasion", name="Persuasion for good")
    lines = PERSUASION_CALLS.read_text().splitlines()[: 2 * HELD_OUT_CALLS + 40]
    calls_import(world=world, text="\n".join(lines), source="test")
    with capture_on_commit_callbacks(execute=False):
        job = judge_fit_start(world=world)
    judge_fit_finish(job, judge_fit.run(json.loads(Path(job.spec_path).read_text())))
    return world
