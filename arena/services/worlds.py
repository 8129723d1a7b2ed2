"""Writes of worlds: the default lettings world every workspace gets (with its simulated
scenarios and the simulator's eight moves), new worlds, and what describes a world's business:
its name, description, the system prompt its agent opens with, and its moves."""

from __future__ import annotations

from typing import Any

from arena.errors import DuelBadInput
from arena.models import Scenario, World
from arena.moves import MovesInvalid, lettings_moves, moves_clean
from trainers.moves.simulator import DEFAULT_SCENARIOS

LETTINGS_WORLD_SLUG = "lettings"
NAME_MAX = 200
DESCRIPTION_MAX = 2000
SYSTEM_PROMPT_MAX = 4000


class WorldBadInput(DuelBadInput):
    """A world's field cannot take the value given; `field` names it (an API answers 400
    with the field as the key)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def world_create_lettings(*, slug: str = LETTINGS_WORLD_SLUG, name: str = "Lettings") -> World:
    """The default world every workspace gets: lettings calls played by the simulator."""
    world, created = World.objects.get_or_create(
        slug=slug,
        defaults={
            "name": name,
            "description": "A letting agent on the phone with people looking to rent. "
            "Customers are simulated personas on fixed seeds.",
            "moves": lettings_moves(),
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


def _text(field: str, value: Any, *, limit: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise WorldBadInput(field, f"{field} must be text.")
    text = value.strip()
    if required and not text:
        raise WorldBadInput(field, f"{field} is empty.")
    if len(text) > limit:
        raise WorldBadInput(field, f"{field} is {len(text)} characters; keep it under {limit}.")
    return text


def _moves(value: Any) -> list[dict[str, str]]:
    try:
        return moves_clean(value)
    except MovesInvalid as error:
        raise WorldBadInput("moves", str(error)) from None


def world_create(
    *,
    slug: str,
    name: str,
    description: str = "",
    system_prompt: str = "",
    moves: list[dict[str, str]] | None = None,
) -> World:
    """A world with no simulator (a business's own, filled with its real calls); an existing
    slug returns that world unchanged. No moves given: the generic set (World.moves)."""
    defaults: dict[str, Any] = {
        "name": _text("name", name, limit=NAME_MAX, required=True),
        "description": _text("description", description, limit=DESCRIPTION_MAX),
        "system_prompt": _text("system_prompt", system_prompt, limit=SYSTEM_PROMPT_MAX),
    }
    if moves is not None:
        defaults["moves"] = _moves(moves)
    world, _created = World.objects.get_or_create(slug=slug, defaults=defaults)
    return world


def world_update(*, world: World, **changes: Any) -> World:
    """Change what describes a world: any of name, description, system_prompt (blank: the
    default naming the world) and moves. All checked before anything is written, so a bad
    field changes nothing; the next training and every reply served from now on use them."""
    checks = {
        "name": lambda value: _text("name", value, limit=NAME_MAX, required=True),
        "description": lambda value: _text("description", value, limit=DESCRIPTION_MAX),
        "system_prompt": lambda value: _text("system_prompt", value or "", limit=SYSTEM_PROMPT_MAX),
        "moves": _moves,
    }
    unknown = sorted(set(changes) - set(checks))
    if unknown:
        raise WorldBadInput(unknown[0], f"A world has no editable field {', '.join(unknown)}.")
    cleaned = {field: checks[field](value) for field, value in changes.items()}
    if cleaned:
        World.objects.filter(pk=world.pk).update(**cleaned)
        world.refresh_from_db()
    return world


def world_system_prompt_set(*, world: World, system_prompt: str) -> World:
    """Set the agent's system prompt of a world (blank: the default naming the world)."""
    return world_update(world=world, system_prompt=system_prompt)


def world_moves_set(*, world: World, moves: list[dict[str, str]]) -> World:
    """Set a world's moves (2 to 16, unique non-empty names; arena.moves.moves_clean)."""
    return world_update(world=world, moves=moves)
