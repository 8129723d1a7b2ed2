"""Writes of worlds: the default lettings world every workspace gets (with its
simulated scenarios), new worlds, and the system prompt a world's agent opens with."""

from __future__ import annotations

from arena.errors import DuelBadInput
from arena.models import Scenario, World
from trainers.simulator import DEFAULT_SCENARIOS

LETTINGS_WORLD_SLUG = "lettings"


def world_create_lettings(*, slug: str = LETTINGS_WORLD_SLUG, name: str = "Lettings") -> World:
    """The default world every workspace gets: lettings calls played by the simulator."""
    world, created = World.objects.get_or_create(
        slug=slug,
        defaults={
            "name": name,
            "description": "A letting agent on the phone with people looking to rent. "
            "Customers are simulated personas on fixed seeds.",
        },
    )
    if created:
        Scenario.objects.bulk_create(
            Scenario(
                world=world,
                slug=scenario.slug,
                name=scenario.name,
                seed=scenario.seed,
                **scenario.persona.to_dict(),
            )
            for scenario in DEFAULT_SCENARIOS
        )
    return world


def world_create(*, slug: str, name: str, description: str = "") -> World:
    world, _created = World.objects.get_or_create(
        slug=slug, defaults={"name": name, "description": description}
    )
    return world


SYSTEM_PROMPT_MAX = 4000


def world_system_prompt_set(*, world: World, system_prompt: str) -> World:
    """Set the agent's system prompt of a world (blank: the default naming the world). The
    next training and every reply served from now on open with it."""
    text = (system_prompt or "").strip()
    if len(text) > SYSTEM_PROMPT_MAX:
        raise DuelBadInput(
            f"system_prompt is {len(text)} characters; keep it under {SYSTEM_PROMPT_MAX}."
        )
    World.objects.filter(pk=world.pk).update(system_prompt=text)
    world.refresh_from_db()
    return world
