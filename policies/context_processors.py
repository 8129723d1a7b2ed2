"""The page frame's header badge: the world in view and who plays each role in it.

The badge names the three roles: the customer (never a model), the agent (the live version)
and the judge. It lives here because it reads both the arena (the world) and the registry (the
agent); settings names it next to the platform's own context processor.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from arena.models import World
from arena.selectors import world_description, world_in_view
from policies.selectors import policy_agent_label, policy_live


def world_badge(request) -> dict[str, Any]:
    if (
        getattr(request, "tenant", None) is None
        or connection.schema_name == "public"
        or not request.user.is_authenticated
    ):
        return {}
    world = world_in_view(request)
    if world is None:
        return {"worlds": [], "world": None}
    # The world chosen with ?world= stays in view on the next pages.
    if request.session.get("world") != world.slug:
        request.session["world"] = world.slug
    # What the world is (its customers, what to do where it has none yet): the World page
    # reads it too, for the same world in view.
    described = world_description(world)
    return {
        "worlds": list(World.objects.order_by("name")),
        "world": world,
        "world_described": described,
        "badge": {
            "customer": described.customer,
            "agent": policy_agent_label(policy_live(world=world), world=world),
            "judge": world.judge_label,
        },
    }
