"""Undo of one's own last pick until it is frozen (issue 40, point 10): the service, its API
(POST picks/undo/ and DELETE picks/{id}/) with each refusal a 409 naming why, and another
workspace refused."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from arena.errors import DuelConflict, DuelNotFound
from arena.models import DuelPair, Pick, World
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit, pick_undo
from tests.conftest import client_for, make_user


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path


def _pick(world, reviewer, **verdict) -> Pick:
    pair = duel_next(world=world, reviewer=reviewer, generate=False)
    return pick_submit(pair_id=pair.pk, reviewer=reviewer, **{"chosen": "A", **verdict})


def test_it_takes_back_the_last_pick_and_the_pair_comes_back_to_the_reviewer(lettings, rita):
    first = _pick(lettings, rita)
    last = _pick(lettings, rita, kind="tie", note="same")
    assert DuelPair.objects.get(pk=last.pair_id).is_open is False
    undone = pick_undo(reviewer=rita, world=lettings)
    assert undone.pk == last.pk
    assert list(Pick.objects.values_list("pk", flat=True)) == [first.pk]
    pair = DuelPair.objects.get(pk=last.pair_id)
    assert (pair.is_open, pair.pick_count, pair.reserved_by_id) == (True, 0, rita.pk)
    # The Duel serves it to them again, and they pick anew.
    assert duel_next(world=lettings, reviewer=rita, generate=False).pk == pair.pk
    again = pick_submit(pair_id=pair.pk, reviewer=rita, chosen="B")
    assert again.chosen_reply_id == pair.reply_b_id


def test_it_refuses_with_the_reason_and_changes_nothing(lettings, rita, rob, datasets):
    with pytest.raises(DuelConflict, match="You have no pick in Lettings to undo"):
        pick_undo(reviewer=rita, world=lettings)
    older = _pick(lettings, rita)
    robs = _pick(lettings, rob)
    newer = _pick(lettings, rita)
    with pytest.raises(DuelConflict, match=f"Pick {robs.pk} is not yours"):
        pick_undo(reviewer=rita, pick_id=robs.pk)
    with pytest.raises(DuelConflict, match=f"Pick {older.pk} is not your last pick"):
        pick_undo(reviewer=rita, pick_id=older.pk)
    with pytest.raises(DuelNotFound, match="No pick 999999"):
        pick_undo(reviewer=rita, pick_id=999999)
    preference_freeze(world=lettings, by=rita)
    with pytest.raises(DuelConflict, match="frozen into preferences v1.*can no longer be undone"):
        pick_undo(reviewer=rita, world=lettings)
    assert Pick.objects.count() == 3
    assert DuelPair.objects.get(pk=newer.pair_id).pick_count == 1


@pytest.fixture
def picked(workspace):
    """Rita's and Rob's picks in acme's Lettings (Rob's last)."""
    make_user(workspace, "rita@acme.test", "reviewer")
    make_user(workspace, "rob@acme.test", "reviewer")
    with schema_context(workspace.schema_name):
        from django.contrib.auth import get_user_model

        lettings = World.objects.get(slug="lettings")
        duel_pairs_generate(world=lettings, count=6)
        users = get_user_model().objects
        rita = _pick(lettings, users.get(username="rita@acme.test"))
        rob = _pick(lettings, users.get(username="rob@acme.test"))
        return rita.pk, rob.pk


def test_the_api_undoes_ones_own_last_pick_only(workspace, picked, datasets):
    ritas, robs = picked
    rita = client_for(workspace, "rita@acme.test")
    not_yours = rita.delete(f"/api/rl/picks/{robs}/")
    assert not_yours.status_code == 409
    assert "is not yours" in not_yours.json()["detail"]
    undone = rita.post(
        "/api/rl/picks/undo/", {"pack": "lettings", "pick": ritas}, content_type="application/json"
    )
    assert undone.status_code == 200, undone.content
    body = undone.json()
    assert (body["undone"], body["pack"]) == (ritas, "lettings")
    assert body["item"]["pair"] == body["pair"]  # served back, to pick anew
    none_left = rita.post("/api/rl/picks/undo/", {}, content_type="application/json")
    assert none_left.status_code == 409
    assert "no pick" in none_left.json()["detail"]
    owner = client_for(workspace, "owner@acme.test")
    assert owner.post("/api/rl/preferences/freeze/", {"pack": "lettings"}).status_code == 201
    rob = client_for(workspace, "rob@acme.test")
    frozen = rob.delete(f"/api/rl/picks/{robs}/")
    assert frozen.status_code == 409
    assert "frozen into preferences v1" in frozen.json()["detail"]
    with schema_context(workspace.schema_name):
        assert list(Pick.objects.values_list("pk", flat=True)) == [robs]


def test_another_workspace_cannot_undo_a_pick(workspace, other_workspace, picked, outsider_client):
    _ritas, robs = picked
    for response in (
        outsider_client.delete(f"/api/rl/picks/{robs}/"),
        outsider_client.post("/api/rl/picks/undo/", {}, content_type="application/json"),
    ):
        assert response.status_code in {401, 403}
    # Signed in to its own workspace, the pick's id names nothing there.
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.delete(f"/api/rl/picks/{robs}/").status_code == 404
    with schema_context(workspace.schema_name):
        assert Pick.objects.count() == 2
