"""The leaderboard's games from finished evaluations, and why an evaluation gave none
(registered with policies.leaderboard in evaluation.apps).

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from django.db.models import QuerySet

from evaluation import scoring
from evaluation.models import Evaluation
from evaluation.verdicts import NO_VERDICT


def _evaluations_between(labels: dict[int, str]) -> QuerySet[Evaluation]:
    # A version against its own untrained base is no game between two versions.
    return (
        Evaluation.objects.filter(
            state=Evaluation.State.DONE, candidate_id__in=labels, baseline_id__in=labels
        )
        .exclude(purpose=Evaluation.Purpose.AGAINST_BASE)
        .order_by("id")
    )


def evaluation_games(labels: dict[int, str]) -> list[tuple[str, str]]:
    """The leaderboard's games from evaluations (registered with policies.leaderboard in
    evaluation.apps), on what each verdict rests: where the simulator played the duel, one
    game per seeded customer only one version won; elsewhere one per turn the judge scored
    won or lost, and none from an evaluation with no verdict (evaluation.verdicts)."""
    games: list[tuple[str, str]] = []
    for evaluation in _evaluations_between(labels):
        summary = evaluation.summary or {}
        decided = evaluation.verdict_decided
        if decided.source == "simulator":
            duel = summary["simulator"]
            wins, losses = duel.get("candidate_only_won"), duel.get("baseline_only_won")
        elif decided.outcome in (NO_VERDICT, scoring.INCOMPLETE):
            continue
        else:
            wins, losses = summary.get("wins"), summary.get("losses")
        candidate, baseline = labels[evaluation.candidate_id], labels[evaluation.baseline_id]
        games += [(candidate, baseline)] * int(wins or 0)
        games += [(baseline, candidate)] * int(losses or 0)
    return games


def evaluation_games_left_out(labels: dict[int, str]) -> list[str]:
    """Why an evaluation gave the leaderboard no games: its verdict's words, the judge's raw
    win rate beside them."""
    left_out = []
    for evaluation in _evaluations_between(labels):
        decided = evaluation.verdict_decided
        if decided.outcome in (NO_VERDICT, scoring.INCOMPLETE) and decided.source == "judge":
            title = f"{labels[evaluation.candidate_id]} vs {labels[evaluation.baseline_id]}"
            why = decided.words or "too few moments compared for a verdict"
            left_out.append(f"{title} (#{evaluation.pk}): {why}")
    return left_out
