"""The game: the four missions on the workspace's home page, each with where the workspace
stands and what to do next.

Each mission belongs to the app that plays it (the Duel to arena, Level up to training, the
Boss fight to evaluation, Crown the champion to policies): each registers its mission, and
whatever else the home page shows of it, in its `AppConfig.ready()`. The platform only orders
and renders them; it imports no app.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mission:
    number: int
    title: str
    url: str
    role: str
    what: str
    standing: list[str]
    next_step: str
    done: bool


_MISSIONS: dict[int, Callable[[], Mission]] = {}
_HOME_PARTS: dict[str, Callable[[], Any]] = {}


def mission_register(number: int, standing: Callable[[], Mission]) -> None:
    """`standing()` says, when the home page renders, where the workspace stands."""
    _MISSIONS[number] = standing


def home_part_register(name: str, read: Callable[[], Any]) -> None:
    """Something else the home page shows, under `name` in its context (a read)."""
    _HOME_PARTS[name] = read


def missions_standing() -> list[Mission]:
    return [_MISSIONS[number]() for number in sorted(_MISSIONS)]


def home_context() -> dict[str, Any]:
    return {
        "missions": missions_standing(),
        **{name: read() for name, read in _HOME_PARTS.items()},
    }
