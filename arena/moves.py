"""A world's moves: the named steps its agent can take, each with a one-line description.

A world stores them as `[{"name", "description"}]` (World.moves). The name is the key that
replies, pairs, the map and move labels carry, so it is short and stable; the description is
what a manager, a reviewer and (later) the move labeller read. Lettings keeps the simulator's
eight (trainers.moves.simulator.MOVES, so the simulator's replies land on the map); a world given no
moves gets the small generic set below, which its manager can rename.

Pure data and validation: no queries, so models, services, the API and pages share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainers.moves.simulator import MOVE_LABELS, MOVES

MIN_MOVES = 2
MAX_MOVES = 16
# Replies, pairs and turns keep a move in a 40-character column.
NAME_MAX = 40
DESCRIPTION_MAX = 200

_LETTINGS_DESCRIPTIONS: dict[str, str] = {
    "greet": "Open the call: say who you are and build rapport.",
    "give_details": "Describe the property: rooms, area, rent and terms.",
    "confirm": "Check what the customer needs: dates, budget, who will live there.",
    "handle_objection": "Answer the concern the customer has just raised.",
    "reassure": "Put the customer at ease: safety, fairness, no pressure.",
    "propose_viewing": "Suggest coming to see the property in person.",
    "offer_slot": "Offer a concrete time for the agreed viewing.",
    "close": "Wrap up: confirm the next step and thank the customer.",
}
LETTINGS_MOVES: tuple[dict[str, str], ...] = tuple(
    {"name": name, "description": _LETTINGS_DESCRIPTIONS[name]} for name in MOVES
)

# Shares its names with lettings where the step is the same (greet, handle_objection,
# reassure, close), so labels written for one read the same in the other.
GENERIC_MOVES: tuple[dict[str, str], ...] = (
    {"name": "greet", "description": "Open the conversation and build rapport."},
    {"name": "ask", "description": "Ask about the customer's situation and needs."},
    {"name": "inform", "description": "Explain the offer: what it is, what it costs, why."},
    {"name": "handle_objection", "description": "Answer the concern the customer has raised."},
    {"name": "reassure", "description": "Put the customer at ease: trust, safety, no pressure."},
    {"name": "propose_next_step", "description": "Suggest the concrete next step."},
    {"name": "close", "description": "Wrap up: confirm what was agreed and thank them."},
)


class MovesInvalid(ValueError):
    """The moves given cannot be a world's moves; the message names the item and the field."""


def lettings_moves() -> list[dict[str, str]]:
    return [dict(move) for move in LETTINGS_MOVES]


def generic_moves() -> list[dict[str, str]]:
    return [dict(move) for move in GENERIC_MOVES]


def _one_line(value: Any, *, where: str, limit: int, required: bool) -> str:
    if not isinstance(value, str):
        raise MovesInvalid(f"{where} must be text, not {type(value).__name__}.")
    text = value.strip()
    if required and not text:
        raise MovesInvalid(f"{where} is empty: every move needs a name.")
    if "\n" in text or "\r" in text:
        raise MovesInvalid(f"{where} must be one line.")
    if len(text) > limit:
        raise MovesInvalid(f"{where} is {len(text)} characters; keep it to {limit}.")
    return text


def moves_clean(raw: Any) -> list[dict[str, str]]:
    """The moves as stored, or MovesInvalid: 2 to 16 items, each {"name", "description"}
    with a unique, non-empty one-line name (case and spaces do not make two names differ)."""
    if not isinstance(raw, list):
        raise MovesInvalid('moves must be a list of {"name", "description"} objects.')
    if not MIN_MOVES <= len(raw) <= MAX_MOVES:
        raise MovesInvalid(
            f"moves has {len(raw)} item(s); a world has {MIN_MOVES} to {MAX_MOVES} moves."
        )
    cleaned: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for position, item in enumerate(raw):
        where = f"moves[{position}]"
        if not isinstance(item, dict):
            raise MovesInvalid(f'{where} must be an object {{"name", "description"}}.')
        unknown = sorted(set(item) - {"name", "description"})
        if unknown:
            raise MovesInvalid(f"{where} has unknown field(s) {', '.join(unknown)}.")
        name = _one_line(item.get("name"), where=f"{where}.name", limit=NAME_MAX, required=True)
        description = _one_line(
            item.get("description", ""),
            where=f"{where}.description",
            limit=DESCRIPTION_MAX,
            required=False,
        )
        key = " ".join(name.lower().split())
        if key in seen:
            raise MovesInvalid(
                f"{where}.name '{name}' repeats moves[{seen[key]}].name: names must be unique."
            )
        seen[key] = position
        cleaned.append({"name": name, "description": description})
    return cleaned


def move_names(moves: Sequence[Any]) -> list[str]:
    """The names of stored moves, in order (a bare string counts as its own name)."""
    return [move["name"] if isinstance(move, dict) else str(move) for move in moves]


def move_label(name: str) -> str:
    """How a page writes a move: the simulator's own label where it has one, else the name
    with underscores as spaces and a capital first letter."""
    if name in MOVE_LABELS:
        return MOVE_LABELS[name]
    words = name.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def moves_as_text(moves: Sequence[Any]) -> str:
    """One "name: description" line per move: the form managers edit them in."""
    lines = []
    for move in moves:
        if isinstance(move, dict):
            description = move.get("description", "")
            lines.append(f"{move['name']}: {description}" if description else move["name"])
        else:
            lines.append(str(move))
    return "\n".join(lines)


def moves_from_text(text: str) -> list[dict[str, str]]:
    """The form's lines back as moves ("name: description"; blank lines skipped), cleaned."""
    raw = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        name, _colon, description = line.partition(":")
        raw.append({"name": name, "description": description})
    return moves_clean(raw)
