"""The queue's "most informative first" order: the pair whose two judge totals lie closest
together first (the gap pair making stores beside the judgements); reserved and picked once
as in "weakest first"; chosen by the API's and the page's `order`; per workspace."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from arena.errors import DuelBadInput
from arena.models import DuelPair, Judgement, Pick, World
from arena.selectors import QueueSelection
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit, queue_ordered
from tests.conftest import api_token, client_for, make_user, token_client

INFORMATIVE = QueueSelection(order="informative")


def _gap(pair: DuelPair) -> float:
    def total(reply_id: int) -> float:
        return (
            Judgement.objects.filter(reply_id=reply_id, judge_model=pair.judge_model)
            .order_by("-created_at", "-id")
            .first()
            .total
        )

    return abs(total(pair.reply_a_id) - total(pair.reply_b_id))


def _expected_order(world: World) -> list[int]:
    pairs = DuelPair.objects.filter(world=world, is_open=True)
    return [p.pk for p in sorted(pairs, key=lambda p: (round(_gap(p), 9), p.judge_total, p.pk))]


def _open_pairs(world: World) -> list[tuple]:
    """What a failure message shows: each open pair's id, judge, total and stored gap."""
    return list(
        DuelPair.objects.filter(world=world, is_open=True).values_list(
            "pk", "judge_model", "judge_total", "judge_gap", "reserved_by_id"
        )
    )


def _judged(pair: DuelPair, total_a: float, total_b: float) -> None:
    """As if the pair's judge had given its replies these totals when it made the pair: the
    judgements and the gap pair making stores beside them."""
    Judgement.objects.filter(reply_id=pair.reply_a_id).update(total=total_a)
    Judgement.objects.filter(reply_id=pair.reply_b_id).update(total=total_b)
    DuelPair.objects.filter(pk=pair.pk).update(judge_gap=abs(total_a - total_b))


def _make_closest_not_weakest(world: World) -> DuelPair:
    """Make the weakest pair's replies far apart and another pair's identical, so the two
    orders cannot agree by chance. The judge may itself have scored two replies of another
    pair alike (a tie the queue then breaks as "weakest first"): those are set a little apart,
    so the identical pair is the one closest pair."""
    weakest = DuelPair.objects.filter(world=world).order_by("judge_total", "id").first()
    _judged(weakest, 0.0, 1.0)
    closest = DuelPair.objects.filter(world=world).exclude(pk=weakest.pk).last()
    _judged(closest, 0.6, 0.6)
    tied = DuelPair.objects.filter(world=world, judge_gap__lt=0.01).exclude(pk=closest.pk)
    for pair in tied:
        _judged(pair, 0.5, 0.55)
    return closest


def test_it_serves_the_pair_the_judge_is_least_sure_of_first(lettings, rita):
    closest = _make_closest_not_weakest(lettings)
    assert _expected_order(lettings)[0] == closest.pk, _open_pairs(lettings)
    pair = duel_next(world=lettings, reviewer=rita, selection=INFORMATIVE)
    assert pair.pk == closest.pk, (closest.pk, _open_pairs(lettings))
    assert pair.reserved_by_id == rita.pk
    # "weakest first" still serves by judge total.
    weakest = DuelPair.objects.filter(world=lettings).order_by("judge_total", "id").first()
    assert weakest.pk != closest.pk


def test_its_whole_order_follows_the_gap_then_the_weakest_rule(lettings):
    _make_closest_not_weakest(lettings)
    ordered = queue_ordered(DuelPair.objects.filter(world=lettings, is_open=True), "informative")
    assert [pair.pk for pair in ordered] == _expected_order(lettings)


def test_ties_are_broken_as_weakest_first(lettings):
    for pair in DuelPair.objects.filter(world=lettings):
        _judged(pair, 0.5, 0.5)
    ordered = queue_ordered(DuelPair.objects.filter(world=lettings), "informative")
    weakest = DuelPair.objects.filter(world=lettings).order_by("judge_total", "id")
    assert [p.pk for p in ordered] == [p.pk for p in weakest]


def test_it_reserves_and_takes_each_pick_once_in_this_order(lettings, rita, rob):
    first = duel_next(world=lettings, reviewer=rita, selection=INFORMATIVE)
    second = duel_next(world=lettings, reviewer=rob, selection=INFORMATIVE)
    assert first.pk != second.pk
    assert duel_next(world=lettings, reviewer=rita, selection=INFORMATIVE).pk == first.pk
    pick_submit(pair_id=first.pk, reviewer=rita, chosen="A")
    assert duel_next(world=lettings, reviewer=rita, selection=INFORMATIVE).pk != first.pk
    assert Pick.objects.filter(pair=first).count() == 1


def test_it_refuses_an_unknown_order_naming_the_field(lettings):
    with pytest.raises(DuelBadInput, match="'order'"):
        QueueSelection.from_params({"order": "loudest"}, world=lettings)
    assert QueueSelection.from_params({"order": "informative"}, world=lettings).order == (
        "informative"
    )
    assert "most informative first" in INFORMATIVE.describe()


@pytest.fixture
def pairs(workspace, settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        duel_pairs_generate(world=world, count=6)
        return _make_closest_not_weakest(world)


def test_the_api_takes_the_order_and_refuses_a_bad_one(workspace, pairs):
    make_user(workspace, "rita@acme.test", "reviewer")
    client = client_for(workspace, "rita@acme.test")
    bad = client.get("/api/rl/duel/next/", {"pack": "lettings", "order": "loudest"})
    assert bad.status_code == 400
    assert "order" in bad.json()["detail"]
    response = client.get("/api/rl/duel/next/", {"pack": "lettings", "order": "informative"})
    assert response.status_code == 200
    with schema_context(workspace.schema_name):
        assert response.json()["item"]["pair"] == pairs.pk, (pairs.pk, _open_pairs(pairs.world))
    assert "most informative first" in response.json()["selection"]


def test_the_page_offers_both_orders(workspace, pairs):
    make_user(workspace, "rita@acme.test", "reviewer")
    client = client_for(workspace, "rita@acme.test")
    page = client.get("/duel/", {"world": "lettings", "order": "informative"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'value="informative" selected' in html
    assert 'value="weakest"' in html
    bad = client.get("/duel/", {"world": "lettings", "order": "loudest"})
    assert bad.status_code == 200
    assert "order" in bad.content.decode()


def test_another_workspace_never_sees_these_pairs_in_this_order(workspace, other_workspace, pairs):
    token = api_token(other_workspace, "owner@rival.test")
    params = "?pack=lettings&order=informative"
    assert token_client(workspace, token).get(f"/api/rl/duel/next/{params}").status_code == 401
    own = token_client(other_workspace, token).get(f"/api/rl/duel/next/{params}")
    with schema_context(workspace.schema_name):
        acme_pairs = set(DuelPair.objects.values_list("pk", flat=True))
        assert not DuelPair.objects.filter(reserved_by__isnull=False).exists()
    assert own.status_code == 200, own.content
    item = own.json()["item"]
    if item is not None:  # the rival's own pair, made in its own schema
        with schema_context(other_workspace.schema_name):
            assert DuelPair.objects.filter(pk=item["pair"]).exists()
    assert acme_pairs
