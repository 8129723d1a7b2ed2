"""Reads the page frame needs: which world is in view and who plays each role in it."""

from __future__ import annotations

import importlib
from typing import Any


def world_badge_for(request) -> dict[str, Any]:
    """The world in view (?world=<slug>, remembered in the session) and its header badge.

    The badge names the three roles: the customer (never a model), the agent (the live
    version) and the judge. Apps are looked up by name: the platform does not import them.
    """
    arena_models = importlib.import_module("arena.models")
    arena_selectors = importlib.import_module("arena.selectors")
    policy_selectors = importlib.import_module("policies.selectors")
    worlds = list(arena_models.World.objects.order_by("name"))
    wanted = request.GET.get("world") or request.session.get("world")
    world = next((w for w in worlds if w.slug == wanted), worlds[0] if worlds else None)
    if world is None:
        return {"worlds": [], "world": None}
    if request.session.get("world") != world.slug:
        request.session["world"] = world.slug
    agent = policy_selectors.policy_live()
    return {
        "worlds": worlds,
        "world": world,
        "badge": {
            "customer": arena_selectors.world_customer_label(world),
            "agent": policy_selectors.policy_agent_label(agent),
            "judge": world.judge_label,
        },
    }
