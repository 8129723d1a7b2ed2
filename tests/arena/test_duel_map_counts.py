"""The Duel map's counts add up: each open pair stands under one move (its reply A's, or B's
where A has none), so the per-move counts sum to the open pairs, and a move's count is the queue
a click on it preloads. Seen before: Greet said 180 open pairs in a queue of 143, a pair whose
two replies both greet counted twice."""

from __future__ import annotations

from arena.models import DuelPair
from arena.selectors import QueueSelection, duel_stats, world_map


def _open(world):
    return DuelPair.objects.filter(world=world, is_open=True)


def test_it_counts_each_open_pair_once(lettings):
    # Two replies of the same move (as when imported turns were all labelled greet).
    first = _open(lettings).order_by("id").first()
    DuelPair.objects.filter(pk=first.pk).update(move_b=first.move_a)
    # A pair whose reply A carries no move stands under B's.
    second = _open(lettings).exclude(pk=first.pk).order_by("id").first()
    DuelPair.objects.filter(pk=second.pk).update(move_a="")
    drawn = world_map(lettings)
    counts = {node["move"]: node["count"] for node in drawn["nodes"]}
    assert sum(counts.values()) + drawn["unplaced"] == duel_stats(lettings)["open"]
    assert drawn["unplaced"] == 0
    assert sum(counts.values()) == _open(lettings).count()


def test_a_move_s_count_is_the_queue_its_click_preloads(lettings):
    first = _open(lettings).order_by("id").first()
    DuelPair.objects.filter(pk=first.pk).update(move_b=first.move_a)
    drawn = world_map(lettings)
    for node in drawn["nodes"]:
        preloaded = QueueSelection(move=node["move"]).apply(_open(lettings))
        assert preloaded.count() == node["count"], node["move"]
    for edge in drawn["edges"]:
        selection = QueueSelection(move=edge["target"], previous_move=edge["source"])
        assert selection.apply(_open(lettings)).count() == edge["count"]


def test_pairs_with_no_move_of_the_world_are_counted_apart(lettings):
    pair = _open(lettings).first()
    DuelPair.objects.filter(pk=pair.pk).update(move_a="", move_b="")
    other = _open(lettings).exclude(pk=pair.pk).first()
    DuelPair.objects.filter(pk=other.pk).update(move_a="dance")
    drawn = world_map(lettings)
    placed = sum(node["count"] for node in drawn["nodes"])
    assert drawn["unplaced"] == 2
    assert placed + drawn["unplaced"] == duel_stats(lettings)["open"]
