"""Each world has its own versions: its v1 · baseline, numbering and lineage, live version,
canary and leaderboard; the Duel, Train, Evaluate, Release, the API and the admin offer only
the world's own. (A Lettings move strategy made live had answered as Persuasion's agent.)"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django_tenants.utils import schema_context

from arena.models import World
from arena.services.worlds import world_create
from policies.canary import canary_running, canary_start, live_call_route
from policies.live import LiveError, live_version, version_make_live
from policies.models import LivePeriod, PolicyVersion
from policies.services import VersionWorldMismatch, version_register


def _trained(world: World, name: str = "trained") -> PolicyVersion:
    return version_register(
        world=world,
        name=name,
        parent=PolicyVersion.objects.get(world=world, number=1),
        move_strategy={"kind": "scripted"},
        learned_from={"kind": "test"},
    )


@pytest.fixture
def lettings(in_workspace):
    return World.objects.get(slug="lettings")


@pytest.fixture
def charity(in_workspace):
    return world_create(slug="charity", name="Charity chats")


def test_it_gives_every_world_its_own_baseline(lettings, charity):
    baselines = PolicyVersion.objects.filter(number=1).order_by("world__name")
    assert [(version.world.slug, version.label) for version in baselines] == [
        ("charity", "v1 · baseline"),
        ("lettings", "v1 · baseline"),
    ]
    # A world made any other way (the admin, a shell) gets one too.
    made_by_hand = World.objects.create(slug="by-hand", name="By hand")
    assert PolicyVersion.objects.get(world=made_by_hand, number=1).name == "baseline"


def test_it_numbers_versions_per_world(lettings, charity):
    lettings_v2 = _trained(lettings)
    lettings_v3 = _trained(lettings)
    charity_v2 = _trained(charity)
    assert (lettings_v2.number, lettings_v3.number, charity_v2.number) == (2, 3, 2)
    assert charity_v2.parent == PolicyVersion.objects.get(world=charity, number=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyVersion.objects.create(world=charity, number=2, name="twin")


def test_it_refuses_a_parent_from_another_world(lettings, charity):
    lettings_v2 = _trained(lettings)
    with pytest.raises(VersionWorldMismatch, match="belongs to Lettings") as refused:
        version_register(
            world=charity, name="x", parent=lettings_v2, move_strategy={}, learned_from={}
        )
    assert refused.value.field == "parent"
    assert not PolicyVersion.objects.filter(world=charity, number=2).exists()


def test_it_keeps_a_live_version_and_a_canary_per_world(lettings, charity):
    lettings_v2, charity_v2 = _trained(lettings), _trained(charity)
    version_make_live(version=lettings_v2)
    assert live_version(world=lettings) == lettings_v2
    assert live_version(world=charity) == PolicyVersion.objects.get(world=charity, number=1)

    # Both worlds run a canary at once; each against its own live version.
    lettings_canary = canary_start(candidate=_trained(lettings, "next"), share=0.5)
    charity_canary = canary_start(candidate=charity_v2, share=0.5)
    assert lettings_canary.live == lettings_v2
    assert charity_canary.live.world == charity
    assert canary_running(world=charity) == charity_canary
    with pytest.raises(LiveError, match="already running in Charity chats"):
        canary_start(candidate=charity_v2, share=0.2)

    # A call to the charity's agent never reaches a Lettings version.
    routed = [live_call_route(call_id=f"charity-{n}", world=charity) for n in range(40)]
    assert {call.version.world_id for call in routed} == {charity.pk}

    # Making a version live in one world ends only that world's canary and period.
    version_make_live(version=charity_v2)
    assert canary_running(world=lettings) == lettings_canary
    assert canary_running(world=charity) is None
    assert LivePeriod.objects.filter(current=True).count() == 2


def test_the_live_call_api_routes_to_the_named_world(lettings, charity, owner_client):
    charity_v2 = _trained(charity)
    version_make_live(version=charity_v2)
    to_charity = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "c-1", "pack": "charity"}, "application/json"
    ).json()
    assert (to_charity["pack"], to_charity["version"]) == ("charity", 2)
    # Without a pack, with two worlds: a 400 naming it (never the first world by name).
    unnamed = owner_client.post("/api/rl/live/calls/", {"call_id": "c-2"}, "application/json")
    assert unnamed.status_code == 400
    assert "pack" in unnamed.json()
    to_lettings = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "c-3", "pack": "lettings"}, "application/json"
    ).json()
    assert (to_lettings["pack"], to_lettings["version"]) == ("lettings", 1)
    unknown = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "c-4", "pack": "nowhere"}, "application/json"
    )
    assert unknown.status_code == 400
    assert "pack" in unknown.json()
    # The canary API names its world, and takes a version number in that world.
    started = owner_client.post(
        "/api/rl/canary/start/",
        {"candidate": _trained(lettings).number, "share": 0.2, "pack": "lettings"},
        "application/json",
    )
    assert started.status_code == 201, started.content
    assert (started.json()["pack"], started.json()["candidate"]) == ("lettings", 2)
    assert owner_client.get("/api/rl/canary/?pack=charity").json()["id"] is None


def test_the_api_lists_each_versions_world_and_filters_by_it(lettings, charity, owner_client):
    _trained(lettings)
    _trained(charity)
    every = owner_client.get("/api/rl/policies/").json()["results"]
    assert sorted((row["pack"], row["number"]) for row in every) == [
        ("charity", 1),
        ("charity", 2),
        ("lettings", 1),
        ("lettings", 2),
    ]
    only = owner_client.get("/api/rl/policies/?pack=charity").json()["results"]
    assert [(row["pack"], row["label"]) for row in only] == [
        ("charity", "v1 · baseline"),
        ("charity", "v2 · trained"),
    ]
    unknown = owner_client.get("/api/rl/policies/?pack=nowhere")
    assert unknown.status_code == 400
    assert "pack" in unknown.json()


def test_the_api_refuses_another_workspace_whatever_the_pack(workspace, outsider_client):
    for path in ("/api/rl/policies/?pack=lettings", "/api/rl/canary/?pack=lettings"):
        assert outsider_client.get(path).status_code in {401, 403}
    routed = outsider_client.post(
        "/api/rl/live/calls/", {"call_id": "x", "pack": "lettings"}, "application/json"
    )
    assert routed.status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert not PolicyVersion.objects.filter(live_calls__external_id="x").exists()


def test_the_admin_filters_versions_by_world(
    lettings, charity, workspace, owner_client, outsider_client
):
    # Signing the outsider in switched the connection to the rival's schema.
    with schema_context(workspace.schema_name):
        _trained(charity, "charity-only")
        _trained(lettings, "lettings-only")
    path = "/admin/policies/policyversion/"
    listing = owner_client.get(f"{path}?world__id__exact={charity.pk}").content.decode()
    assert "charity-only" in listing
    assert "lettings-only" not in listing
    assert "Charity chats" in owner_client.get(path).content.decode()  # the filter and column
    assert outsider_client.get(f"{path}?world__id__exact={charity.pk}").status_code == 302


def test_the_admin_refuses_a_parent_from_another_world(lettings, charity, owner_client):
    lettings_v2 = _trained(lettings)
    charity_v2 = _trained(charity)
    response = owner_client.post(
        f"/admin/policies/policyversion/{charity_v2.pk}/change/",
        {
            "name": "moved",
            "parent": lettings_v2.pk,
            "description": "",
            "move_strategy": "{}",
            "learned_from": "{}",
        },
    )
    assert response.status_code == 200  # the form again, with the error on the field
    assert "must be of the same world" in response.content.decode()
    charity_v2.refresh_from_db()
    assert charity_v2.parent.world == charity


def test_the_pages_offer_only_the_world_in_views_versions(lettings, charity, owner_client):
    _trained(lettings, "lettings-only")
    for path in ("/policies/", "/train/", "/evaluate/", "/duel/", "/release/"):
        page = owner_client.get(f"{path}?world=charity")
        assert page.status_code == 200, path
        assert "lettings-only" not in page.content.decode(), path
    assert "lettings-only" in owner_client.get("/policies/?world=lettings").content.decode()


def test_train_makes_the_next_version_of_its_own_world(lettings, charity):
    from levers9.jobs.models import Job
    from trainers.moves.strategy import SCRIPTED, strategy_table
    from training.finish import version_from_move_strategy
    from training.models import TrainingRun

    _trained(lettings)
    _trained(lettings)  # Lettings is at v3; the charity still at v1
    job = Job.objects.create(
        kind="train",
        trainer="q-learning-online",
        workspace_schema=charity.slug,
        pool_name="cpu",
        card_type="cpu",
    )
    TrainingRun.objects.create(
        job=job, world=charity, parent_version=PolicyVersion.objects.get(world=charity, number=1)
    )
    table = strategy_table(SCRIPTED, scenario=None, max_turns=8)
    version = version_from_move_strategy(
        job, {"strategy": {"kind": "table", "default": table, "tables": {}}, "seed": 7}
    )
    assert (version.world, version.number) == (charity, 2)


def test_train_refuses_a_parent_the_world_does_not_have(lettings, charity, owner_client):
    _trained(lettings)  # v2 exists in Lettings only
    refused = owner_client.post(
        "/api/rl/train/move-strategy/", {"pack": "charity", "parent": 2}, "application/json"
    )
    assert refused.status_code == 400
    assert "no version v2" in refused.json()["parent"][0]
    from training.cards import train_move_strategy

    lettings_v2 = PolicyVersion.objects.get(world=lettings, number=2)
    with pytest.raises(VersionWorldMismatch):
        train_move_strategy(world=charity, parent=lettings_v2)


def test_evaluate_takes_version_numbers_in_its_own_world(lettings, charity, owner_client):
    _trained(lettings)  # v2 exists in Lettings only
    refused = owner_client.post(
        "/api/rl/evaluations/", {"pack": "charity", "candidate": 2}, "application/json"
    )
    assert refused.status_code == 400
    assert "Charity chats has no version v2" in refused.json()["candidate"][0]
    from evaluation.errors import EvaluationError
    from evaluation.services import evaluation_start

    lettings_v2 = PolicyVersion.objects.get(world=lettings, number=2)
    charity_v1 = PolicyVersion.objects.get(world=charity, number=1)
    with pytest.raises(EvaluationError, match="evaluate two versions of one world"):
        evaluation_start(world=charity, candidate=lettings_v2, baseline=charity_v1)
