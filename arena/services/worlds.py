"""Writes of worlds: the default lettings world every workspace gets (with its simulated
scenarios and the simulator's eight moves), new worlds, and what describes a world's business:
its name, description, the system prompt its agent opens with, its moves, and its rubric (the
dimensions its judge scores and its reviewers tick as reasons: arena.judge.world_dimensions)."""

from __future__ import annotations

import math
import re
from typing import Any

from arena.errors import DuelBadInput
from arena.judge.fit_job import judge_fit_soon
from arena.models import JudgeVersion, Scenario, World
from arena.moves import MovesInvalid, lettings_moves, moves_clean
from trainers.judge.rubric import dimension_default
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


# A world's rubric: enough dimensions to say why one reply beats another, few enough to tick
# (the Duel's keys 1-9 reach the first nine).
MIN_DIMENSIONS = 2
MAX_DIMENSIONS = 12
DIMENSION_NAME_MAX = 40
DIMENSION_LABEL_MAX = 60
DIMENSION_HELP_MAX = 200
DIMENSION_WEIGHT_MAX = 10.0
DIMENSION_FIELDS = frozenset({"name", "label", "help", "weight"})
# A name is a key of every score, reason and pick: a slug, so it reads the same in the TSV,
# the API and a model judge's JSON.
_DIMENSION_NAME = re.compile(r"[a-z][a-z0-9_-]*")


def _dimension_weight(value: Any, where: str) -> float:
    if isinstance(value, str):  # the World page's form sends text
        try:
            value = float(value.strip())
        except ValueError:
            raise WorldBadInput(
                "dimensions", f"{where}.weight must be a number, not {value!r}."
            ) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise WorldBadInput("dimensions", f"{where}.weight must be a number, not {value!r}.")
    if not 0 < value <= DIMENSION_WEIGHT_MAX:
        raise WorldBadInput(
            "dimensions",
            f"{where}.weight is {value:g}; a weight is above 0 and at most "
            f"{DIMENSION_WEIGHT_MAX:g}.",
        )
    return float(value)


def _dimension_text(value: Any, where: str, *, limit: int) -> str:
    if not isinstance(value, str):
        raise WorldBadInput("dimensions", f"{where} must be text.")
    text = value.strip()
    if "\n" in text or "\r" in text:
        raise WorldBadInput("dimensions", f"{where} must be one line.")
    if len(text) > limit:
        raise WorldBadInput("dimensions", f"{where} is {len(text)} characters; keep it to {limit}.")
    return text


def dimensions_clean(raw: Any) -> list[dict[str, Any]]:
    """A world's rubric as stored (World.dimensions), or WorldBadInput on "dimensions" naming
    the item and its field: 2 to 12 items {name, label?, help?, weight?}; a name is a unique
    slug (lower-case letters, digits, - and _, starting with a letter, at most 40); help is
    its one-line meaning (at most 200); weight a number above 0 and at most 10. A missing
    label, meaning or weight is the description's for one of the seven, else the name in
    title case, no meaning and 1."""
    if not isinstance(raw, list):
        raise WorldBadInput(
            "dimensions", 'dimensions must be a list of {"name", "help", "weight"} objects.'
        )
    if not MIN_DIMENSIONS <= len(raw) <= MAX_DIMENSIONS:
        raise WorldBadInput(
            "dimensions",
            f"dimensions has {len(raw)} item(s); a world has {MIN_DIMENSIONS} to "
            f"{MAX_DIMENSIONS} dimensions.",
        )
    cleaned: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for position, item in enumerate(raw):
        where = f"dimensions[{position}]"
        if not isinstance(item, dict):
            raise WorldBadInput(
                "dimensions", f'{where} must be an object {{"name", "help", "weight"}}.'
            )
        unknown = sorted(set(item) - DIMENSION_FIELDS)
        if unknown:
            raise WorldBadInput(
                "dimensions",
                f"{where} has unknown field(s) {', '.join(unknown)}; a dimension has name, "
                "label, help and weight.",
            )
        name = _dimension_text(item.get("name"), f"{where}.name", limit=DIMENSION_NAME_MAX)
        name = name.lower()
        if not _DIMENSION_NAME.fullmatch(name):
            raise WorldBadInput(
                "dimensions",
                f"{where}.name {name!r} is not a name: lower-case letters, digits, - and _, "
                "starting with a letter (e.g. 'condition' or 'fair-price').",
            )
        if name in seen:
            raise WorldBadInput(
                "dimensions",
                f"{where}.name '{name}' repeats dimensions[{seen[name]}].name: names must be "
                "unique.",
            )
        seen[name] = position
        default = dimension_default(name)
        label = _dimension_text(
            item.get("label") or default.label, f"{where}.label", limit=DIMENSION_LABEL_MAX
        )
        meaning = item.get("help")
        meaning = _dimension_text(
            default.help if meaning is None else meaning, f"{where}.help", limit=DIMENSION_HELP_MAX
        )
        weight = item.get("weight")
        cleaned.append(
            {
                "name": name,
                "label": label or default.label,
                "help": meaning,
                "weight": default.weight
                if weight is None or weight == ""
                else _dimension_weight(weight, where),
            }
        )
    return cleaned


def world_create(
    *,
    slug: str,
    name: str,
    description: str = "",
    system_prompt: str = "",
    moves: list[dict[str, str]] | None = None,
    dimensions: list[dict[str, Any]] | None = None,
) -> World:
    """A world with no simulator (a business's own, filled with its real calls); an existing
    slug returns that world unchanged. No moves given: the generic set (World.moves); no
    dimensions: the description's seven (World.dimensions)."""
    defaults: dict[str, Any] = {
        "name": _text("name", name, limit=NAME_MAX, required=True),
        "description": _text("description", description, limit=DESCRIPTION_MAX),
        "system_prompt": _text("system_prompt", system_prompt, limit=SYSTEM_PROMPT_MAX),
    }
    if moves is not None:
        defaults["moves"] = _moves(moves)
    if dimensions is not None:
        defaults["dimensions"] = dimensions_clean(dimensions)
    world, _created = World.objects.get_or_create(slug=slug, defaults=defaults)
    return world


def world_update(*, world: World, **changes: Any) -> World:
    """Change what describes a world: any of name, description, system_prompt (blank: the
    default naming the world), moves and dimensions (its rubric and reason tags:
    dimensions_clean). All checked before anything is written, so a bad field changes
    nothing; the next training and every reply served from now on use them. A changed rubric
    asks for a refit of a world that has a fitted judge, whose heads are per dimension."""
    checks = {
        "name": lambda value: _text("name", value, limit=NAME_MAX, required=True),
        "description": lambda value: _text("description", value, limit=DESCRIPTION_MAX),
        "system_prompt": lambda value: _text("system_prompt", value or "", limit=SYSTEM_PROMPT_MAX),
        "moves": _moves,
        "dimensions": dimensions_clean,
    }
    unknown = sorted(set(changes) - set(checks))
    if unknown:
        raise WorldBadInput(unknown[0], f"A world has no editable field {', '.join(unknown)}.")
    cleaned = {field: checks[field](value) for field, value in changes.items()}
    rubric_changed = "dimensions" in cleaned and cleaned["dimensions"] != world.dimensions
    if cleaned:
        World.objects.filter(pk=world.pk).update(**cleaned)
        world.refresh_from_db()
    if rubric_changed and JudgeVersion.objects.filter(world=world).exists():
        judge_fit_soon(world_ids={world.pk})
    return world


def world_dimensions_set(*, world: World, dimensions: list[dict[str, Any]]) -> World:
    """Set a world's rubric: its dimensions and reason tags (dimensions_clean)."""
    return world_update(world=world, dimensions=dimensions)


def world_system_prompt_set(*, world: World, system_prompt: str) -> World:
    """Set the agent's system prompt of a world (blank: the default naming the world)."""
    return world_update(world=world, system_prompt=system_prompt)


def world_moves_set(*, world: World, moves: list[dict[str, str]]) -> World:
    """Set a world's moves (2 to 16, unique non-empty names; arena.moves.moves_clean)."""
    return world_update(world=world, moves=moves)
