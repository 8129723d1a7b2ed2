"""Mission 6, Crown the champion, on the home page (registered in policies.apps)."""

from __future__ import annotations

from django.db.models import QuerySet

from levers9.game import Mission
from policies.live import live_version
from policies.models import PolicyVersion


def crown_mission() -> Mission:
    live = live_version()
    return Mission(
        6,
        "Crown the champion",
        "policies",
        "owner",
        "Make the version that won its evaluation live.",
        [f"live: {live.label}" if live else "nothing live"],
        "Make the winner live, or send it a share of live calls from Release."
        if live is None or live.number == 1
        else "Watch the won rate it causes under Release.",
        done=live is not None and live.number > 1,
    )


def home_versions() -> QuerySet[PolicyVersion]:
    return PolicyVersion.objects.select_related("parent")
