"""Mission 5, the Boss fight, on the home page (registered in evaluation.apps)."""

from __future__ import annotations

from evaluation.models import Evaluation
from evaluation.verdicts import NO_VERDICT
from levers9.game import Mission


def _last_words(evaluation: Evaluation) -> str:
    """The last evaluation's verdict and what it rests on: on the simulator, the won-share
    difference with the judge's win rate beside it; with no verdict, why and the judge's raw
    win rate; elsewhere the judge's win rate and the figure of the judge that licensed it."""
    summary = evaluation.summary or {}
    decided = evaluation.verdict_decided
    words = f"last: {evaluation.title} — {decided.label or 'done'}"
    win_rate = evaluation.win_rate
    if decided.source == "simulator":
        duel = summary["simulator"]
        words += (
            f" on {duel['episodes']:,} simulated calls "
            f"({duel['won_share_difference'] * 100:+.1f} points won)"
        )
        if win_rate is not None:
            words += f", judge win rate {win_rate:.2f}"
    elif decided.words:
        words += f" ({decided.words.removeprefix('no verdict: ')})"
    elif win_rate is not None:
        words += f", win rate {win_rate:.2f}"
        if decided.licensed_by:
            words += f", licensed by the judge's {decided.licensed_by}"
    return words


def _next_step(evaluation: Evaluation | None) -> str:
    if evaluation is None:
        return "Evaluate before every promotion."
    if evaluation.verdict == "won":
        return "Make the winner live."
    if evaluation.verdict == NO_VERDICT:
        return "Measure the judge first (Environment → Judge): without that, no verdict."
    return "Train again: the candidate did not win."


def boss_fight_mission() -> Mission:
    evaluation = (
        Evaluation.objects.filter(state=Evaluation.State.DONE)
        .exclude(purpose=Evaluation.Purpose.AGAINST_BASE)
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
        _next_step(evaluation),
        done=evaluation is not None,
    )
