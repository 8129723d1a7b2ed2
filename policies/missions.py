"""Mission 6, Crown the champion, on the home page (registered in policies.apps)."""

from __future__ import annotations

from arena.models import World
from levers9.game import Mission
from policies.live import live_version
from policies.selectors import VersionRow, versions_list


def crown_mission() -> Mission:
    """Done once some world has a trained version live; each world's live version listed."""
    lives = [(world, live_version(world=world)) for world in World.objects.order_by("name")]
    lives = [(world, live) for world, live in lives if live is not None]
    crowned = any(live.number > 1 for _world, live in lives)
    return Mission(
        6,
        "Crown the champion",
        "policies",
        "owner",
        "Make the version that won its evaluation live.",
        [f"live in {world.name}: {live.label}" for world, live in lives] or ["nothing live"],
        "Watch the won rate it causes under Release."
        if crowned
        else "Make the winner live, or send it a share of live calls from Release.",
        done=crowned,
    )


def home_versions() -> list[VersionRow]:
    """Every world's versions for Home, each with what it answers with in its world (as the
    header and Policies say it)."""
    return versions_list(world=None)
