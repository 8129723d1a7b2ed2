"""Mission 3, the Duel, on the home page (registered in arena.apps)."""

from __future__ import annotations

from arena.models import Pick, PreferenceVersion
from levers9.game import Mission


def duel_mission() -> Mission:
    frozen = PreferenceVersion.objects.order_by("-number").first()
    picks = Pick.objects.count()
    unfrozen = picks - (frozen.row_count if frozen else 0)
    return Mission(
        3,
        "Duel",
        "duel",
        "reviewer",
        "Compare two replies at one moment of a call and pick the better one.",
        [
            f"{picks} pick(s) made",
            f"frozen: {frozen.label} with {frozen.row_count} pairs"
            if frozen
            else "nothing frozen yet",
        ],
        "Duel a few pairs, then freeze them."
        if not frozen or unfrozen > 0
        else "Keep duelling: Train reads the next frozen version.",
        done=frozen is not None,
    )
