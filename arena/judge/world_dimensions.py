"""A world's rubric: its dimensions, which are also the reasons its reviewers tick in the Duel.
The one resolver (world_dimensions) every part asks — the Duel's reason tags, a pick's
reasons, the judges and their fit, the radar, the overrides and the agreement — so a bike
seller's world scores and asks about its own dimensions, never the lettings world's. A world
that names none has the description's seven (trainers.judge.rubric.DEFAULT_RUBRIC). Its owner edits
them on the World page or over the packs API (arena.services.worlds.world_update). Reads the
world's own field only: no query.
"""

from __future__ import annotations

from arena.models import World
from trainers.judge.rubric import Dimension, rubric_from_stored


def world_dimensions(world: World | None) -> tuple[Dimension, ...]:
    """The world's rubric in its order (World.dimensions); the seven where there is no world."""
    return rubric_from_stored(world.dimensions if world is not None else None)


def world_dimension_names(world: World | None) -> tuple[str, ...]:
    """The names of the world's dimensions: the reason tags a pick may carry there."""
    return tuple(dimension.name for dimension in world_dimensions(world))
