"""Mission 5, the Boss fight, on the home page (registered in evaluation.apps)."""

from __future__ import annotations

from evaluation.models import Evaluation
from levers9.game import Mission


def boss_fight_mission() -> Mission:
    evaluation = (
        Evaluation.objects.filter(state=Evaluation.State.DONE)
        .select_related("candidate", "baseline")
        .first()
    )
    return Mission(
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
