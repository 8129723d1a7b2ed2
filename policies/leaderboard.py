"""The leaderboard: versions ranked by a Bradley-Terry fit over every duel pick between two
versions and every per-turn comparison of an evaluation, with bootstrap intervals."""

from __future__ import annotations

import importlib

from policies.models import PolicyVersion
from trainers.leaderboard import Rating, bradley_terry


def leaderboard_games() -> list[tuple[str, str]]:
    """(winner, loser) version labels. Picks against the real agent or the simulator's
    moves are not games between versions and are left out; ties are left out."""
    games: list[tuple[str, str]] = []
    Pick = importlib.import_module("arena.models").Pick
    labels = {version.pk: version.label for version in PolicyVersion.objects.all()}
    for chosen, rejected in Pick.objects.filter(
        chosen_reply__policy_version__isnull=False, rejected_reply__policy_version__isnull=False
    ).values_list("chosen_reply__policy_version", "rejected_reply__policy_version"):
        if chosen != rejected:
            games.append((labels[chosen], labels[rejected]))
    Evaluation = importlib.import_module("evaluation.models").Evaluation
    for evaluation in Evaluation.objects.filter(state="done"):
        summary = evaluation.summary or {}
        candidate, baseline = labels[evaluation.candidate_id], labels[evaluation.baseline_id]
        games += [(candidate, baseline)] * int(summary.get("wins") or 0)
        games += [(baseline, candidate)] * int(summary.get("losses") or 0)
    return games


def leaderboard() -> list[Rating]:
    return bradley_terry(leaderboard_games(), bootstrap=200)
