"""Picks: a preference with its reasons, reviewer, time and the source of each reply; and
every bad request refused with a clear reason and nothing lost."""

from __future__ import annotations

import pytest

from arena.errors import DuelBadInput, DuelConflict, DuelNotFound
from arena.models import DuelPair, Pick
from arena.services.freeze import preference_freeze
from arena.services.queue import duel_next, pick_submit


def test_it_records_the_preference_and_where_each_reply_came_from(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita)
    pick = pick_submit(
        pair_id=pair.pk, reviewer=rita, chosen="b", reasons=["timing", "dialect", "timing"]
    )
    assert pick.chosen_side == "B"
    assert pick.chosen_reply_id == pair.reply_b_id
    assert pick.rejected_reply_id == pair.reply_a_id
    # Rubric order, each once.
    assert pick.reasons == ["dialect", "timing"]
    assert pick.reviewer_name == "rita@acme.test"
    assert pick.world_id == lettings.pk
    labels = {pick.chosen_source, pick.rejected_source}
    assert "v1 · baseline" in labels
    assert any(label.startswith("simulator (") for label in labels)
    held = DuelPair.objects.get(pk=pair.pk)
    assert (held.reserved_by_id, held.pick_count) == (None, 1)


def test_it_refuses_an_unknown_reason_and_saves_nothing(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita)
    with pytest.raises(DuelBadInput, match=r"Unknown reason\(s\): 'charm'.*dialect, respect"):
        pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", reasons=["respect", "charm"])
    with pytest.raises(DuelBadInput, match="'chosen' must be 'A' or 'B'"):
        pick_submit(pair_id=pair.pk, reviewer=rita, chosen="C")
    assert Pick.objects.count() == 0
    # The pair is still held: the reviewer can correct and pick.
    assert pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", reasons=["respect"])


def test_it_refuses_a_pick_for_a_pair_the_reviewer_does_not_hold(lettings, rita, rob):
    pair = duel_next(world=lettings, reviewer=rita)
    with pytest.raises(DuelConflict, match="another reviewer holds it"):
        pick_submit(pair_id=pair.pk, reviewer=rob, chosen="A")
    never_served = DuelPair.objects.exclude(pk=pair.pk).first()
    with pytest.raises(DuelConflict, match="ask for the next pair"):
        pick_submit(pair_id=never_served.pk, reviewer=rob, chosen="A")
    assert Pick.objects.count() == 0
    assert DuelPair.objects.get(pk=pair.pk).reserved_by_id == rita.pk


def test_it_refuses_a_second_pick_by_the_same_reviewer(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita)
    pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A")
    with pytest.raises(DuelConflict, match="already picked"):
        pick_submit(pair_id=pair.pk, reviewer=rita, chosen="B")
    assert Pick.objects.get().chosen_side == "A"


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path


def test_it_refuses_a_pick_on_a_frozen_pair(lettings, rita, rob, datasets):
    pair = duel_next(world=lettings, reviewer=rita)
    DuelPair.objects.filter(pk=pair.pk).update(picks_wanted=2)
    pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A")
    preference_freeze(world=lettings, by=rita)
    assert duel_next(world=lettings, reviewer=rob).pk != pair.pk  # out of the queue
    with pytest.raises(DuelConflict, match="frozen into preferences v1"):
        pick_submit(pair_id=pair.pk, reviewer=rob, chosen="A")
    assert Pick.objects.count() == 1


def test_it_lets_a_reviewer_finish_a_pair_they_hold_during_a_freeze(lettings, rita, rob, datasets):
    pair = duel_next(world=lettings, reviewer=rita)
    DuelPair.objects.filter(pk=pair.pk).update(picks_wanted=3)
    pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A")
    assert duel_next(world=lettings, reviewer=rob).pk == pair.pk
    preference_freeze(world=lettings, by=rita)
    pick_submit(pair_id=pair.pk, reviewer=rob, chosen="A")  # lands in the next version
    assert DuelPair.objects.get(pk=pair.pk).is_open  # still wants a third pick...
    second = preference_freeze(world=lettings, by=rita)
    closed = DuelPair.objects.get(pk=pair.pk)
    assert (closed.is_open, closed.frozen_in_id) == (False, second.pk)  # ...until frozen


def test_it_refuses_a_pair_that_is_not_in_this_workspace(lettings, rita):
    with pytest.raises(DuelNotFound, match="No duel pair 987654 in this workspace"):
        pick_submit(pair_id=987654, reviewer=rita, chosen="A")
    with pytest.raises(DuelBadInput, match="pair id"):
        pick_submit(pair_id="seven", reviewer=rita, chosen="A")
