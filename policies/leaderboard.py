"""The leaderboard: versions ranked by a Bradley-Terry fit over every duel pick between two
versions and every per-turn comparison of an evaluation, with bootstrap intervals.

The picks are the arena's (below): read here. Evaluations live above the registry, so evaluation
registers where its games come from (`leaderboard_games_source_register`, in its ready()).
"""

from __future__ import annotations

from collections.abc import Callable

from arena.models import Pick
from policies.models import PolicyVersion
from trainers.leaderboard import Rating, bradley_terry

# (labels by version id) -> (winner, loser) label pairs.
GamesSource = Callable[[dict[int, str]], list[tuple[str, str]]]
_GAME_SOURCES: list[GamesSource] = []


def leaderboard_games_source_register(source: GamesSource) -> None:
    if source not in _GAME_SOURCES:
        _GAME_SOURCES.append(source)


def leaderboard_games() -> list[tuple[str, str]]:
    """(winner, loser) version labels. Picks against the real agent or the simulator's
    moves are not games between versions and are left out; ties are left out."""
    games: list[tuple[str, str]] = []
    labels = {version.pk: version.label for version in PolicyVersion.objects.all()}
    for chosen, rejected in Pick.objects.filter(
        chosen_reply__policy_version__isnull=False, rejected_reply__policy_version__isnull=False
    ).values_list("chosen_reply__policy_version", "rejected_reply__policy_version"):
        if chosen != rejected:
            games.append((labels[chosen], labels[rejected]))
    for source in _GAME_SOURCES:
        games += source(labels)
    return games


def leaderboard() -> list[Rating]:
    return bradley_terry(leaderboard_games(), bootstrap=200)
