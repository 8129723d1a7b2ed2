"""The game: the four missions on the workspace's home page, each with where the workspace
stands and what to do next.

The platform does not import the apps at module level (they depend on it, not the reverse);
the home page reads them by name when it renders.
"""

from __future__ import annotations

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


def missions_standing() -> list[Mission]:
    from arena.models import Pick, PreferenceVersion
    from evaluation.models import Evaluation
    from levers9.jobs.models import Job
    from policies.live import live_version
    from policies.models import PolicyVersion

    frozen = PreferenceVersion.objects.order_by("-number").first()
    picks = Pick.objects.count()
    unfrozen = picks - (frozen.row_count if frozen else 0)
    trained = PolicyVersion.objects.filter(number__gt=1).order_by("-number")
    newest = trained.first()
    running = Job.objects.filter(state__in=[*Job.ACTIVE_STATES]).count()
    evaluation = (
        Evaluation.objects.filter(state=Evaluation.State.DONE)
        .select_related("candidate", "baseline")
        .first()
    )
    live = live_version()

    duel = Mission(
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
    level_up = Mission(
        4,
        "Level up",
        "train",
        "manager",
        "Train the next numbered version of the agent.",
        [
            f"{trained.count()} version(s) trained; newest {newest.label}"
            if newest
            else "only v1 · baseline so far",
            f"{running} job(s) running" if running else "no job running",
        ],
        "Train a move strategy (two minutes, no GPU)."
        if not newest
        else "Evaluate the newest version against its parent.",
        done=newest is not None,
    )
    boss = Mission(
        5,
        "Boss fight",
        "evaluate",
        "manager",
        "Evaluate two versions on the same calls.",
        [
            f"last: {evaluation.title} — {evaluation.verdict or 'done'}"
            + (f", win rate {evaluation.win_rate:.2f}" if evaluation.win_rate is not None else "")
            if evaluation
            else "no evaluation yet"
        ],
        "Evaluate before every promotion."
        if not evaluation
        else (
            "Make the winner live."
            if evaluation.verdict == "won"
            else "Train again: the candidate did not win."
        ),
        done=evaluation is not None,
    )
    crown = Mission(
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
    return [duel, level_up, boss, crown]


def home_context() -> dict[str, Any]:
    return {"missions": missions_standing()}
