"""Mission 5, the Boss fight, on the home page (registered in evaluation.apps)."""

from __future__ import annotations

from evaluation.models import Evaluation
from levers9.game import Mission


def _last_words(evaluation: Evaluation) -> str:
    """The last evaluation's verdict and what it rests on: on the simulator, the won-share
    difference with the judge's win rate beside it; elsewhere the judge's win rate."""
    summary = evaluation.summary or {}
    words = f"last: {evaluation.title} — {evaluation.verdict or 'done'}"
    win_rate = evaluation.win_rate
    if summary.get("verdict_source") == "simulator":
        duel = summary["simulator"]
        words += (
            f" on {duel['episodes']:,} simulated calls "
            f"({duel['won_share_difference'] * 100:+.1f} points won)"
        )
        if win_rate is not None:
            words += f", judge win rate {win_rate:.2f}"
    elif win_rate is not None:
        words += f", win rate {win_rate:.2f}"
    return words


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
        [_last_words(evaluation) if evaluation else "no evaluation yet"],
        "Evaluate before every promotion."
        if not evaluation
        else (
            "Make the winner live."
            if evaluation.verdict == "won"
            else "Train again: the candidate did not win."
        ),
        done=evaluation is not None,
    )
