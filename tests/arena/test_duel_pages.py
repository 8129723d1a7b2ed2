"""The Duel page and the admin's Duel views: what a reviewer and a manager see and may do."""

from __future__ import annotations

import re

import pytest
from django_tenants.utils import schema_context

from arena.judge.overrides import judge_override_submit
from arena.models import DuelPair, JudgeOverride, Pick, PreferenceVersion, World
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from tests.arena.duel_helpers import real_world
from tests.conftest import client_for
from tests.pages import page_text


@pytest.fixture(autouse=True)
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path


@pytest.fixture
def reviewer(workspace, rita):
    return client_for(workspace, "rita@acme.test")


def _picked(workspace, user, count=2):
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        duel_pairs_generate(world=world, count=count + 2)
        for _ in range(count):
            pair = duel_next(world=world, reviewer=user)
            pick_submit(pair_id=pair.pk, reviewer=user, chosen="A", reasons=["respect"])
        return pair


def test_it_shows_a_pair_with_shortcuts_reasons_and_the_map(reviewer, workspace):
    page = reviewer.get("/duel/?world=lettings")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="duel-first-item"' in html
    assert "A / ←" in html
    assert "N / Enter" in html
    for reason in ("Dialect", "Respect", "Accuracy", "Progress", "Family", "Timing", "Compliance"):
        assert reason in html
    assert "<svg" in html
    assert "Propose a viewing" in html
    assert "Freezing needs the manager role." in html
    with schema_context(workspace.schema_name):
        held = DuelPair.objects.get(reserved_by__username="rita@acme.test")
    assert f'"pair": {held.pk}' in html
    # The page never names the sources before the pick.
    assert "v1 · baseline" not in html.split("<main>")[1].split('id="stats"')[0]
    # The judge's agreement per dimension, beside the queue (no overrides yet: no rate).
    stats_card = html.split('id="stats"')[1].split('id="map"')[0]
    assert "<tr><td>Respect</td><td>—</td></tr>" in stats_card


def test_it_preloads_the_queue_from_the_map(reviewer, workspace):
    with schema_context(workspace.schema_name):
        duel_pairs_generate(world=World.objects.get(slug="lettings"), count=8)
        pair = DuelPair.objects.exclude(previous_move="").first()
    html = reviewer.get(
        f"/duel/?world=lettings&from={pair.previous_move}&move={pair.move_a}"
    ).content.decode()
    assert "→" in html
    assert "clear the selection" in html
    with schema_context(workspace.schema_name):
        held = DuelPair.objects.get(reserved_by__username="rita@acme.test")
    assert held.previous_move == pair.previous_move
    bad = page_text(reviewer, "/duel/?world=lettings&move=dance")
    assert "Unknown move" in bad


def test_it_lets_a_manager_freeze_from_the_page(owner_client, workspace, rita):
    nothing = owner_client.post("/duel/freeze/", follow=True).content.decode()
    assert "no new picks in Lettings to freeze" in nothing
    _picked(workspace, rita)
    done = owner_client.post("/duel/freeze/", follow=True).content.decode()
    assert "Froze Lettings preferences v1: 2 new picks, 2 in all." in done
    assert "/api/rl/preferences/1/download/?pack=lettings" in done


def test_it_refuses_a_reviewer_the_freeze_and_an_outsider_the_page(
    reviewer, outsider_client, workspace, rita
):
    _picked(workspace, rita)
    assert reviewer.post("/duel/freeze/").status_code == 403
    outsider = outsider_client.get("/duel/")
    assert outsider.status_code == 302
    assert outsider_client.post("/duel/freeze/").status_code == 302
    assert outsider_client.post("/duel/generate/").status_code == 302
    with schema_context(workspace.schema_name):
        assert not PreferenceVersion.objects.exists()


def test_it_makes_pairs_from_the_page(reviewer, workspace):
    done = reviewer.post("/duel/generate/", {"count": "3", "versions": ["1"]}, follow=True)
    assert "3 new pairs in the Lettings queue (from v1 · baseline)." in done.content.decode()


def _make_pairs_form(html: str) -> tuple[str, dict[str, str]]:
    """The Duel page's "Make pairs" form as a browser submits it: its action and the fields
    it sends when nothing is changed (hidden fields and prefilled inputs)."""
    form = re.search(
        r'<form method="post" action="([^"]+)"[^>]*id="make-pairs">(.*?)</form>', html, re.S
    )
    assert form, "the Duel page has no Make pairs form"
    fields = {
        name: value
        for name, value in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', form[2])
    }
    return form[1], fields


@pytest.mark.parametrize("versions", [[], ["1"]])
def test_the_make_pairs_form_lands_back_on_its_worlds_duel(reviewer, workspace, versions):
    """The form as the page renders it, sent as a browser sends it: it named the API's route
    (a JSON error page) and never said which world; now it makes pairs in the world shown,
    with or without versions chosen, and lands back on that world's Duel saying so."""
    with schema_context(workspace.schema_name):
        real_world()
        before = DuelPair.objects.filter(world__slug="real").count()
    html = page_text(reviewer, "/duel/?world=real")
    # The session now remembers "real"; move it to lettings so only the form names the world.
    reviewer.get("/duel/?world=lettings")
    with schema_context(workspace.schema_name):
        lettings_before = DuelPair.objects.filter(world__slug="lettings").count()
    action, fields = _make_pairs_form(html)
    assert action == "/duel/generate/"
    assert fields["world"] == "real"
    fields["count"] = "4"
    done = reviewer.post(action, {**fields, "versions": versions})
    assert done.status_code == 302
    assert done["Location"] == "/duel/?world=real"
    page = reviewer.get(done["Location"])
    assert page["Content-Type"].startswith("text/html")
    text = page.content.decode()
    assert "new pairs in the Real calls queue" in text, text
    with schema_context(workspace.schema_name):
        assert DuelPair.objects.filter(world__slug="real").count() > before
        assert DuelPair.objects.filter(world__slug="lettings").count() == lettings_before


def test_make_pairs_says_what_is_wrong_on_the_page(reviewer, workspace):
    done = reviewer.post(
        "/duel/generate/", {"world": "lettings", "count": "many", "versions": ["99"]}, follow=True
    )
    assert done.status_code == 200
    assert done.redirect_chain[-1][0] == "/duel/?world=lettings"
    assert "How many: give a whole number" in done.content.decode()
    unknown = reviewer.post(
        "/duel/generate/", {"world": "lettings", "versions": ["99"]}, follow=True
    )
    assert "No pairs made: No version v99 in Lettings" in unknown.content.decode()


def test_the_trl_export_is_linked_from_the_duel(owner_client, workspace, rita):
    _picked(workspace, rita)
    owner_client.post("/duel/freeze/")
    html = page_text(owner_client, "/duel/?world=lettings")
    assert 'href="/api/rl/preferences/1/download/?pack=lettings&amp;part=jsonl"' in html


def test_it_plays_a_real_calls_world(reviewer, workspace):
    with schema_context(workspace.schema_name):
        real_world()
    html = page_text(reviewer, "/duel/?world=real")
    assert "call call-" in html  # the moment is a turn of a real call


def test_it_lists_duel_models_in_the_admin(owner_client, workspace, rita):
    pair = _picked(workspace, rita)
    with schema_context(workspace.schema_name):
        judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 0})
    for url in (
        "/admin/arena/duelpair/",
        "/admin/arena/duelpair/?is_open__exact=1",
        "/admin/arena/pick/",
        "/admin/arena/pick/?q=rita",
        "/admin/arena/pick/?frozen=no",
        "/admin/arena/judgeoverride/",
        "/admin/arena/preferenceversion/",
        f"/admin/arena/duelpair/{pair.pk}/change/",
    ):
        assert owner_client.get(url).status_code == 200, url
    assert owner_client.get("/admin/arena/pick/add/").status_code == 403


def test_it_freezes_and_rescores_from_admin_actions(owner_client, workspace, rita):
    pair = _picked(workspace, rita)
    with schema_context(workspace.schema_name):
        judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 0})
        pick_ids = list(Pick.objects.values_list("pk", flat=True))
        override_id = JudgeOverride.objects.get().pk
    response = owner_client.post(
        "/admin/arena/pick/",
        {"action": "freeze_selected", "_selected_action": [min(pick_ids)]},
        follow=True,
    )
    assert "Froze Lettings preferences v1: 1 new picks, 1 in all." in response.content.decode()
    response = owner_client.post(
        "/admin/arena/judgeoverride/",
        {"action": "rescore", "_selected_action": [override_id]},
        follow=True,
    )
    assert "Rescored 1 replies" in response.content.decode()
    with schema_context(workspace.schema_name):
        # Up to the newest pick selected: the first one only.
        assert PreferenceVersion.objects.get().last_pick_id == min(pick_ids)


def test_it_keeps_the_freeze_action_from_a_reviewer_in_the_admin(reviewer, workspace, rita):
    _picked(workspace, rita)
    with schema_context(workspace.schema_name):
        pick_ids = list(Pick.objects.values_list("pk", flat=True))
    listing = reviewer.get("/admin/arena/pick/")
    assert listing.status_code == 200
    assert b"freeze_selected" not in listing.content
    reviewer.post("/admin/arena/pick/", {"action": "freeze_selected", "_selected_action": pick_ids})
    with schema_context(workspace.schema_name):
        assert not PreferenceVersion.objects.exists()


def test_it_refuses_an_outsider_in_the_duel_admin(outsider_client, workspace, rita):
    pair = _picked(workspace, rita)
    for url in (
        "/admin/arena/duelpair/",
        f"/admin/arena/duelpair/{pair.pk}/change/",
        "/admin/arena/pick/",
        "/admin/arena/judgeoverride/",
        "/admin/arena/preferenceversion/",
    ):
        response = outsider_client.get(url)
        assert response.status_code == 302, url
        assert "/admin/login/" in response["Location"]
    with schema_context(workspace.schema_name):
        pick_ids = list(Pick.objects.values_list("pk", flat=True))
    outsider_client.post(
        "/admin/arena/pick/", {"action": "freeze_selected", "_selected_action": pick_ids}
    )
    with schema_context(workspace.schema_name):
        assert not PreferenceVersion.objects.exists()
