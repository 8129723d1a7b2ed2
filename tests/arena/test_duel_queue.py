"""The review queue: weakest first, reservations that expire, selections that preload it,
skips, second opinions, and a new batch when it runs dry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from arena.errors import DuelBadInput
from arena.models import DuelPair, PairSkip, World
from arena.selectors import QueueSelection
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, duel_pairs_request_opinion, duel_skip, pick_submit
from tests.conftest import make_user


def test_it_serves_the_weakest_pair_first(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita)
    lowest = DuelPair.objects.filter(world=lettings).order_by("judge_total", "id").first()
    assert pair.pk == lowest.pk
    assert pair.reserved_by_id == rita.pk
    assert pair.reserved_until > timezone.now() + timedelta(minutes=4)


def test_it_never_serves_two_reviewers_the_same_pair_at_once(lettings, rita, rob):
    first = duel_next(world=lettings, reviewer=rita)
    second = duel_next(world=lettings, reviewer=rob)
    assert first.pk != second.pk
    # Asking again serves each their own pair, not a new one.
    assert duel_next(world=lettings, reviewer=rita).pk == first.pk
    assert duel_next(world=lettings, reviewer=rob).pk == second.pk


def test_it_serves_a_pair_again_once_its_reservation_expired(lettings, rita, rob):
    first = duel_next(world=lettings, reviewer=rita)
    DuelPair.objects.filter(pk=first.pk).update(
        reserved_until=timezone.now() - timedelta(seconds=1)
    )
    assert duel_next(world=lettings, reviewer=rob).pk == first.pk


def test_it_does_not_serve_a_reviewer_a_pair_they_picked_or_skipped(lettings, rita):
    first = duel_next(world=lettings, reviewer=rita)
    pick_submit(pair_id=first.pk, reviewer=rita, chosen="A")
    second = duel_next(world=lettings, reviewer=rita)
    duel_skip(pair=second, reviewer=rita)
    assert PairSkip.objects.filter(pair=second, reviewer=rita).exists()
    third = duel_next(world=lettings, reviewer=rita)
    assert third.pk not in {first.pk, second.pk}
    assert DuelPair.objects.get(pk=second.pk).reserved_by_id is None


def test_it_asks_a_second_reviewer_for_a_pair_that_wants_two_picks(lettings, rita, rob):
    pair = duel_next(world=lettings, reviewer=rita)
    duel_pairs_request_opinion(pairs=DuelPair.objects.filter(pk=pair.pk))
    DuelPair.objects.filter(pk=pair.pk).update(picks_wanted=2)
    pick_submit(pair_id=pair.pk, reviewer=rita, chosen="B")
    assert DuelPair.objects.get(pk=pair.pk).is_open
    assert duel_next(world=lettings, reviewer=rob).pk == pair.pk
    pick_submit(pair_id=pair.pk, reviewer=rob, chosen="B")
    closed = DuelPair.objects.get(pk=pair.pk)
    assert (closed.pick_count, closed.is_open) == (2, False)


def test_it_preloads_the_queue_with_a_move_or_a_transition(lettings, rita):
    pair = DuelPair.objects.filter(world=lettings).exclude(previous_move="").first()
    by_move = duel_next(world=lettings, reviewer=rita, selection=QueueSelection(move=pair.move_a))
    assert pair.move_a in {by_move.move_a, by_move.move_b}
    transition = QueueSelection(move=pair.move_a, previous_move=pair.previous_move)
    held = duel_next(world=lettings, reviewer=rita, selection=transition)
    assert held.previous_move == pair.previous_move
    assert pair.move_a in {held.move_a, held.move_b}


def test_it_preloads_the_queue_with_a_scenario(lettings, rita):
    selection = QueueSelection(scenario="retiree-downsizing")
    pair = duel_next(world=lettings, reviewer=rita, selection=selection)
    assert pair.scenario.slug == "retiree-downsizing"


def test_it_refuses_an_unknown_move_or_scenario(lettings):
    with pytest.raises(DuelBadInput, match="Unknown move 'dance'"):
        QueueSelection.from_params({"move": "dance"}, world=lettings)
    with pytest.raises(DuelBadInput, match="Unknown scenario"):
        QueueSelection.from_params({"scenario": "nobody"}, world=lettings)


def test_it_makes_a_new_batch_when_the_queue_runs_dry(lettings, rita):
    DuelPair.objects.filter(world=lettings).update(is_open=False)
    pair = duel_next(world=lettings, reviewer=rita)
    assert pair is not None
    assert DuelPair.objects.filter(world=lettings, is_open=True).count() > 1


def test_it_says_so_when_nothing_is_left(in_workspace, rita):
    from tests.arena.duel_helpers import real_world

    world = real_world()
    duel_pairs_generate(world=world, count=100)
    DuelPair.objects.filter(world=world).update(is_open=False)
    assert duel_next(world=world, reviewer=rita) is None


def test_a_model_answering_writes_a_few_pairs_now_and_the_rest_in_the_background(
    in_workspace, django_capture_on_commit_callbacks
):
    """A trained version on a CPU takes seconds per reply: the reviewer waits for two pairs,
    not forty; a job writes the rest of the batch."""
    from arena.services.pairs import DUEL_PAIRS_KIND, PAIR_BATCH, SLOW_BATCH, duel_pairs_job_run
    from levers9.jobs.models import Job
    from policies.models import PolicyVersion
    from policies.services import version_runs_on_set
    from tests.policies.stub_server import StubModelServer

    world = World.objects.get(slug="lettings")
    reviewer = make_user(in_workspace, "slow@acme.test", "reviewer")
    stub = StubModelServer().start()
    try:
        version_runs_on_set(
            version=PolicyVersion.objects.get(world__slug="lettings", number=1),
            provider="vllm",
            model="Qwen/Qwen3-14B",
            endpoint_url=stub.base_url,
        )
        with django_capture_on_commit_callbacks(execute=False):
            pair = duel_next(world=world, reviewer=reviewer)
        assert pair is not None
        assert DuelPair.objects.filter(world=world).count() <= SLOW_BATCH
        asked_now = len(stub.requests)
        job = Job.objects.get(kind=DUEL_PAIRS_KIND)
        later = PAIR_BATCH - DuelPair.objects.filter(world=world).count()
        assert job.finish_needs_shown == {
            "world": world.pk,
            "count": later,
            "scenario": "",
            "versions": [],
        }
        made = duel_pairs_job_run(job.pk, lambda step, total, **metrics: None)["made"]
    finally:
        stub.stop()
    assert DuelPair.objects.filter(world=world, is_open=True).count() >= PAIR_BATCH
    assert made >= PAIR_BATCH - SLOW_BATCH
    assert asked_now * 4 < len(stub.requests)  # most of the model's replies came later


def test_the_simulator_answering_refills_a_whole_batch_at_once(in_workspace, monkeypatch):
    from arena.services.pairs import PAIR_BATCH

    world = World.objects.get(slug="lettings")
    reviewer = make_user(in_workspace, "quick@acme.test", "reviewer")
    monkeypatch.setattr(
        "arena.services.pairs.arena_job_start",
        lambda *args, **options: pytest.fail("nothing to do in the background"),
    )
    assert duel_next(world=world, reviewer=reviewer) is not None
    assert DuelPair.objects.filter(world=world).count() == PAIR_BATCH
