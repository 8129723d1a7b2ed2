"""Mission 4, Level up, on the home page (registered in training.apps)."""

from __future__ import annotations

from levers9.game import Mission
from levers9.jobs.models import Job
from policies.models import PolicyVersion


def level_up_mission() -> Mission:
    # Every world's trained versions (each world numbers its own): the newest by date.
    trained = (
        PolicyVersion.objects.filter(number__gt=1).select_related("world").order_by("-created_at")
    )
    newest = trained.first()
    running = Job.objects.filter(state__in=[*Job.ACTIVE_STATES]).count()
    return Mission(
        4,
        "Level up",
        "train",
        "manager",
        "Train the next numbered version of the agent.",
        [
            f"{trained.count()} version(s) trained; newest {newest.world_label}"
            if newest
            else "only v1 · baseline so far",
            f"{running} job(s) running" if running else "no job running",
        ],
        "Train a move strategy (two minutes, no GPU)."
        if not newest
        else "Evaluate the newest version against its parent.",
        done=newest is not None,
    )
