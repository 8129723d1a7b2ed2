"""Engines in its world: a world of recorded calls runs the routes its calls allow (the
off-line learner) or says why not, never the lettings simulator; runs are listed in their own
world only; promotion makes a version in the run's world, and a run that did worse than its
parent is promoted only when confirmed, its version marked "did not learn"."""

from __future__ import annotations

import json
from itertools import islice

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.shipped_data import PERSUASION_CALLS
from policies.models import PolicyVersion
from tests.conftest import api_token, client_for, token_client
from tests.training.engines_runs import q_learning_run_finished
from trainers.moves.offline_outcome import run as offline_run
from training.engines import (
    KnobError,
    PromoteNeedsConfirm,
    engines_routes,
    engines_run_against_parent,
    engines_run_promote,
    engines_run_start,
)
from training.models import TrainingRun

MARKET = "market"


def _market(calls: int = 90) -> World:
    """A world of recorded calls (no simulator): enough calls to hold 40 out."""
    world = world_create(slug=MARKET, name="Second-hand market")
    with PERSUASION_CALLS.open() as lines:
        calls_import(world=world, text="".join(islice(lines, calls)))
    return world


def _spec(job: Job) -> dict:
    with open(job.spec_path) as spec:
        return json.load(spec)


def _done(job: Job, result: dict) -> Job:
    """What the worker leaves behind: the trainer's result on a finished job."""
    Job.objects.filter(pk=job.pk).update(state=Job.State.DONE, result=result)
    job.refresh_from_db()
    return job


def _lettings_run(episodes: int) -> Job:
    """A finished q-learning Engines run in lettings, from its v1."""
    lettings = World.objects.get(slug="lettings")
    parent = PolicyVersion.objects.get(world=lettings, number=1)
    return q_learning_run_finished(world=lettings, parent=parent, episodes=episodes)


def _market_run(world: World, django_capture_on_commit_callbacks) -> Job:
    """An off-line Engines run in the market, started as the page does, finished as the worker
    would finish it (the trainer on the packed spec)."""
    parent = PolicyVersion.objects.get(world=world, number=1)
    with django_capture_on_commit_callbacks(execute=False):
        job = engines_run_start(algorithm="offline-outcome", knobs={}, world=world, parent=parent)
    return _done(job, offline_run(_spec(job)))


# --- A world of recorded calls runs what its calls allow ---------------------------------


def test_it_refuses_a_simulator_engine_in_a_world_of_recorded_calls_saying_why(in_workspace):
    market = _market(5)
    parent = PolicyVersion.objects.get(world=market, number=1)
    for algorithm in ("q-learning-online", "ppo"):
        with pytest.raises(KnobError) as refused:
            engines_run_start(algorithm=algorithm, knobs={}, world=market, parent=parent)
        assert refused.value.knob == "algorithm"
        assert "no simulator" in str(refused.value)
        assert "offline-outcome" in str(refused.value)
    assert not Job.objects.exists()
    routes = {route.name: route for route in engines_routes(world=market)}
    assert routes["offline-outcome"].refused == ""
    assert "no simulator" in routes["q-learning-online"].refused


def test_it_runs_the_off_line_route_on_the_worlds_own_training_calls(
    in_workspace, django_capture_on_commit_callbacks
):
    market = _market()
    parent = PolicyVersion.objects.get(world=market, number=1)
    with django_capture_on_commit_callbacks(execute=False):
        job = engines_run_start(algorithm="offline-outcome", knobs={}, world=market, parent=parent)
    assert (job.kind, job.trainer) == ("engines", "offline-outcome")
    assert job.training_run.world == market
    spec = _spec(job)
    assert spec["pack"] == MARKET
    assert "scenarios" not in spec
    held_out = set(market.calls.filter(held_out=True).values_list("external_id", flat=True))
    assert held_out
    assert {call["id"] for call in spec["calls"]}.isdisjoint(held_out)
    assert len(spec["calls"]) == market.calls.filter(held_out=False).count()


def test_a_world_with_no_outcomes_says_why_it_cannot_run_off_line(in_workspace):
    empty = world_create(slug="new", name="New shop")
    parent = PolicyVersion.objects.get(world=empty, number=1)
    with pytest.raises(KnobError, match="no recorded calls") as refused:
        engines_run_start(algorithm="offline-outcome", knobs={}, world=empty, parent=parent)
    assert refused.value.knob == "algorithm"
    assert not Job.objects.exists()


def test_the_page_runs_in_the_world_in_view_never_lettings(
    workspace, owner_client, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name):
        _market()
    page = owner_client.get("/engines/", {"world": MARKET}).content.decode()
    assert "Off-line on real calls" in page
    assert "no simulator" in page
    refused = owner_client.post("/engines/", {"world": MARKET, "algorithm": "q-learning-online"})
    assert refused.status_code == 400
    assert "no simulator" in refused.content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        started = owner_client.post("/engines/", {"world": MARKET, "algorithm": "offline-outcome"})
    assert started.status_code == 302
    with schema_context(workspace.schema_name):
        job = Job.objects.get(kind="engines")
        assert job.training_run.world.slug == MARKET
        assert _spec(job)["pack"] == MARKET
        # The run's page names no Lettings persona.
        run_page = owner_client.get(f"/engines/runs/{job.pk}/").content.decode()
        assert "Second-hand market" in run_page
        assert "young-professional" not in run_page


# --- Listed in their own world ------------------------------------------------------------


def test_runs_are_listed_in_their_own_world_only(
    workspace, owner_client, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name):
        market_run = _market_run(_market(), django_capture_on_commit_callbacks)
        lettings_run = _lettings_run(32)
    lettings_page = owner_client.get("/engines/", {"world": "lettings"}).content.decode()
    market_page = owner_client.get("/engines/", {"world": MARKET}).content.decode()
    assert f'href="/engines/runs/{lettings_run.pk}/"' in lettings_page
    assert f'href="/engines/runs/{market_run.pk}/"' not in lettings_page
    assert f'href="/engines/runs/{market_run.pk}/"' in market_page
    assert f'href="/engines/runs/{lettings_run.pk}/"' not in market_page
    listed = owner_client.get("/api/rl/engines/runs/", {"pack": MARKET})
    assert listed.status_code == 200, listed.content
    assert [run["id"] for run in listed.json()["results"]] == [market_run.pk]
    assert listed.json()["pack"] == MARKET
    lettings_list = owner_client.get("/api/rl/engines/runs/", {"pack": "lettings"}).json()
    assert [run["id"] for run in lettings_list["results"]] == [lettings_run.pk]
    unnamed = owner_client.get("/api/rl/engines/runs/")
    assert unnamed.status_code == 400
    assert "pack" in unnamed.json()


@pytest.mark.django_db
def test_another_workspace_never_lists_our_runs(workspace, other_workspace, outsider_client):
    with schema_context(workspace.schema_name):
        _lettings_run(32)
    # The rival's cookies on our host: not signed in here.
    assert outsider_client.get("/api/rl/engines/runs/", {"pack": "lettings"}).status_code in {
        401,
        403,
    }
    # On its own host the rival sees its own lettings world, with none of our runs.
    rival = token_client(other_workspace, api_token(other_workspace, "owner@rival.test"))
    theirs = rival.get("/api/rl/engines/runs/", {"pack": "lettings"})
    assert theirs.status_code == 200
    assert theirs.json()["results"] == []
    # Its token on our host is refused.
    ours = token_client(workspace, api_token(other_workspace, "owner@rival.test"))
    assert ours.get("/api/rl/engines/runs/", {"pack": "lettings"}).status_code in {401, 403}


# --- Promoted in the run's world ----------------------------------------------------------


def test_it_promotes_an_off_line_run_in_its_own_world(
    in_workspace, django_capture_on_commit_callbacks
):
    market = _market()
    job = _market_run(market, django_capture_on_commit_callbacks)
    lettings_versions = PolicyVersion.objects.filter(world__slug="lettings").count()
    standing = engines_run_against_parent(job=job)
    assert standing is not None
    assert standing["parent"] is not None
    version = engines_run_promote(job=job, confirm=True)
    assert version.world == market
    assert version.label == "v2 · promoted"
    assert version.move_strategy["kind"] == "outcome"
    assert version.learned_from["held_out_calls"] == market.calls.filter(held_out=True).count()
    assert PolicyVersion.objects.filter(world__slug="lettings").count() == lettings_versions


def test_a_run_is_never_promoted_from_another_world(
    workspace, owner_client, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name):
        job = _market_run(_market(), django_capture_on_commit_callbacks)
        with pytest.raises(KnobError) as refused:
            engines_run_promote(job=job, world=World.objects.get(slug="lettings"), confirm=True)
        assert refused.value.knob == "pack"
    api = owner_client.post(
        f"/api/rl/engines/runs/{job.pk}/promote/",
        {"pack": "lettings", "confirm": True},
        content_type="application/json",
    )
    assert api.status_code == 400
    assert "pack" in api.json()
    page = owner_client.post(
        f"/engines/runs/{job.pk}/promote/", {"world": "lettings", "confirm": "on"}, follow=True
    )
    assert "Second-hand market" in page.content.decode()
    with schema_context(workspace.schema_name):
        assert not PolicyVersion.objects.filter(number=2).exists()


def test_a_run_that_did_worse_than_its_parent_asks_to_be_confirmed_and_is_marked(in_workspace):
    job = _lettings_run(32)
    standing = engines_run_against_parent(job=job)
    assert standing["worse"], standing  # a run too short to learn: below the scripted parent
    assert standing["learned"] < standing["parent"]
    with pytest.raises(PromoteNeedsConfirm) as refused:
        engines_run_promote(job=job)
    assert refused.value.field == "confirm"
    assert PolicyVersion.objects.filter(world__slug="lettings").count() == 1
    version = engines_run_promote(job=job, confirm=True)
    assert version.world.slug == "lettings"
    assert version.did_not_learn
    assert "parent" in version.did_not_learn[0]


def test_a_run_that_learned_is_promoted_without_a_confirmation_or_a_mark(in_workspace):
    job = _lettings_run(300_000)
    assert not engines_run_against_parent(job=job)["worse"]
    assert engines_run_promote(job=job).did_not_learn == []


def test_the_page_and_the_api_ask_to_confirm_a_worse_run(workspace, owner_client):
    with schema_context(workspace.schema_name):
        by_page, by_api = _lettings_run(32), _lettings_run(32)
    page = owner_client.get(f"/engines/runs/{by_page.pk}/", {"world": "lettings"})
    assert 'name="confirm"' in page.content.decode()
    assert "did worse than its parent" in page.content.decode()
    owner_client.post(f"/engines/runs/{by_page.pk}/promote/", {"world": "lettings"})
    with schema_context(workspace.schema_name):
        assert PolicyVersion.objects.filter(world__slug="lettings").count() == 1
    owner_client.post(
        f"/engines/runs/{by_page.pk}/promote/", {"world": "lettings", "confirm": "on"}
    )
    with schema_context(workspace.schema_name):
        assert TrainingRun.objects.get(job=by_page).produced_version.did_not_learn
    unconfirmed = owner_client.post(f"/api/rl/engines/runs/{by_api.pk}/promote/")
    assert unconfirmed.status_code == 409
    assert "confirm" in unconfirmed.json()
    confirmed = owner_client.post(
        f"/api/rl/engines/runs/{by_api.pk}/promote/",
        {"confirm": True},
        content_type="application/json",
    )
    assert confirmed.status_code == 201, confirmed.content
    assert confirmed.json()["did_not_learn"]


@pytest.mark.django_db
def test_another_workspace_cannot_promote_our_run(workspace, other_workspace, outsider_client):
    with schema_context(workspace.schema_name):
        job = _lettings_run(300_000)
    path = f"/api/rl/engines/runs/{job.pk}/promote/"
    assert outsider_client.post(path, {"confirm": True}).status_code in {401, 403}
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.post(path, {"confirm": True}, content_type="application/json").status_code == 404
    with schema_context(workspace.schema_name):
        assert TrainingRun.objects.get(job=job).produced_version is None
