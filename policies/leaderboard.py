"""The leaderboard of one world: its versions ranked by a Bradley-Terry fit over every duel
pick between two of them and every per-turn comparison of an evaluation, with bootstrap
intervals.

The picks are the arena's (below): read here. Evaluations live above the registry, so evaluation
registers where its games come from (`leaderboard_games_source_register`, in its ready()).
"""

from __future__ import annotations

from collections.abc import Callable

from arena.models import Pick, World
from policies.models import PolicyVersion
from trainers.stats.leaderboard import Rating, bradley_terry

# (labels by version id, of one world's versions) -> (winner, loser) label pairs; a source
# leaves out every game with a version not among the labels.
GamesSource = Callable[[dict[int, str]], list[tuple[str, str]]]
# (labels by version id) -> why some of its comparisons gave no games (no verdict), in words.
LeftOutSource = Callable[[dict[int, str]], list[str]]
_GAME_SOURCES: list[GamesSource] = []
_LEFT_OUT_SOURCES: list[LeftOutSource] = []


def leaderboard_games_source_register(
    source: GamesSource, *, left_out: LeftOutSource | None = None
) -> None:
    if source not in _GAME_SOURCES:
        _GAME_SOURCES.append(source)
    if left_out is not None and left_out not in _LEFT_OUT_SOURCES:
        _LEFT_OUT_SOURCES.append(left_out)


def _labels(world: World) -> dict[int, str]:
    return {version.pk: version.label for version in PolicyVersion.objects.filter(world=world)}


def leaderboard_games(*, world: World) -> list[tuple[str, str]]:
    """(winner, loser) labels of `world`'s versions, from its picks and evaluations. Picks
    against the real agent or the simulator's moves are not games between versions and are
    left out; ties (a pick of kind tie or both bad too) are left out; so is any game with
    another world's version."""
    games: list[tuple[str, str]] = []
    labels = _labels(world)
    for chosen, rejected in Pick.objects.filter(
        world=world,
        # A tie or both bad names no winner: its chosen and rejected are only A and B.
        kind=Pick.Kind.PREFERENCE,
        chosen_reply__author__isnull=False,
        rejected_reply__author__isnull=False,
    ).values_list("chosen_reply__author__version", "rejected_reply__author__version"):
        if chosen != rejected and chosen in labels and rejected in labels:
            games.append((labels[chosen], labels[rejected]))
    for source in _GAME_SOURCES:
        games += source(labels)
    return games


def leaderboard(*, world: World) -> list[Rating]:
    """`world`'s versions ranked: each world has its own leaderboard."""
    return bradley_terry(leaderboard_games(world=world), bootstrap=200)


def leaderboard_left_out(*, world: World) -> list[str]:
    """What gave `world`'s leaderboard no games, and why: an evaluation with no verdict (its
    judge at chance, say) is no game, and the page says so beside the ranking."""
    labels = _labels(world)
    return [words for source in _LEFT_OUT_SOURCES for words in source(labels)]
