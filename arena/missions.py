"""Mission 3, the Duel, on the home page (registered in arena.apps)."""

from __future__ import annotations

from arena.models import Pick, PreferenceVersion
from arena.selectors import picks_frozen
from levers9.game import Mission


def duel_mission() -> Mission:
    # Each world freezes its own picks: the mission counts them across the worlds.
    picks = Pick.objects.count()
    frozen = picks_frozen(Pick.objects.all()).count()
    worlds_frozen = (
        PreferenceVersion.objects.filter(world__isnull=False).values("world").distinct().count()
    )
    return Mission(
        3,
        "Duel",
        "duel",
        "reviewer",
        "Compare two replies at one moment of a call and pick the better one.",
        [
            f"{picks} pick(s) made",
            f"frozen: {frozen} pick(s) in the versions of {worlds_frozen} world(s)"
            if worlds_frozen
            else "nothing frozen yet",
        ],
        "Duel a few pairs, then freeze them."
        if not worlds_frozen or picks > frozen
        else "Keep duelling: Train reads each world's next frozen version.",
        done=worlds_frozen > 0,
    )
