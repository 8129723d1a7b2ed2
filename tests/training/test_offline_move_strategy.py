"""The move-strategy card on a world with no simulator: off-line on labelled real calls, held
out by call, always ending in a version that says which learner ran and how far to trust it."""

from __future__ import annotations

import json
from itertools import islice

import pytest
from django_tenants.utils import schema_context

from arena.models import Call
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.jobs.services import job_finish
from levers9.shipped_data import PERSUASION_CALLS
from policies.models import PolicyVersion
from tests.conftest import client_for
from tests.pages import page_text
from tests.worker_tasks import worker_task_done
from trainers.moves.offline_outcome import run
from training.cards import train_move_strategy


def _donation_world(count: int):
    world = world_create(slug="donations", name="Save the Children chats")
    with PERSUASION_CALLS.open() as lines:
        calls_import(world=world, text="".join(islice(lines, count)))
    return world


def _start(world, django_capture_on_commit_callbacks) -> Job:
    parent = PolicyVersion.objects.get(world=world, number=1)
    with django_capture_on_commit_callbacks(execute=False):
        return train_move_strategy(world=world, parent=parent, seed=2)


def _spec(job: Job) -> dict:
    with open(job.spec_path) as spec:
        return json.load(spec)


def _run_and_finish(job: Job) -> Job:
    """What the worker does (the trainer on the packed spec), then the dashboard's finish."""
    worker_task_done(job, run(_spec(job)))
    assert job_finish(job_id=job.pk) is True
    job.refresh_from_db()
    return job


def test_it_ends_in_a_v2_with_the_learner_the_held_out_calls_and_the_interval(
    in_workspace, django_capture_on_commit_callbacks
):
    world = _donation_world(150)
    job = _start(world, django_capture_on_commit_callbacks)
    assert job.trainer == "offline-outcome"
    job = _run_and_finish(job)
    assert job.state == Job.State.DONE, job.error
    version = job.training_run.produced_version
    assert version.label == "v2 · trained"
    record = version.learned_from
    assert record["learner"].startswith("per-state outcome model")
    assert record["held_out_calls"] == 40
    assert record["trained_on"]["calls"] == 110
    assert record["interval"]["low"] <= record["difference"] <= record["interval"]["high"]
    assert record["trust"]
    strategy = version.move_strategy
    assert strategy["kind"] == "outcome"
    assert set(strategy["choices"].values()) <= set(world.move_names)
    # The card and the version page say it.
    client = client_for(in_workspace, "owner@acme.test")
    train_page = page_text(client, "/train/", {"world": "donations"})
    assert "off-line on real calls" in train_page
    assert "40 held-out calls" in train_page
    assert "per-state outcome model" in train_page
    policies_page = page_text(client, "/policies/")
    assert "per-state outcome model" in policies_page
    assert "held out calls" in policies_page


def test_the_learner_never_sees_a_held_out_call(in_workspace, django_capture_on_commit_callbacks):
    world = _donation_world(150)
    held_out = set(
        Call.objects.filter(world=world, held_out=True).values_list("external_id", flat=True)
    )
    assert len(held_out) == 40
    spec = _spec(_start(world, django_capture_on_commit_callbacks))
    assert {call["id"] for call in spec["calls"]}.isdisjoint(held_out)
    assert len(spec["calls"]) == 110
    # Turning every held-out outcome around changes nothing the learner gets.
    for call in Call.objects.filter(world=world, held_out=True):
        call.outcome = "lost" if call.outcome == "won" else "won"
        call.save(update_fields=["outcome"])
    again = _spec(_start(world, django_capture_on_commit_callbacks))
    assert again["calls"] == spec["calls"]
    assert run(again)["strategy"] == run(spec)["strategy"]


def test_it_ends_in_a_version_even_with_few_calls(in_workspace, django_capture_on_commit_callbacks):
    world = _donation_world(3)
    job = _run_and_finish(_start(world, django_capture_on_commit_callbacks))
    assert job.state == Job.State.DONE, job.error
    record = job.training_run.produced_version.learned_from
    assert record["trained_on"]["calls"] == 3
    assert record["held_out_calls"] == 0
    assert record["interval"] is None
    assert record["trust"].startswith("not measured")


@pytest.mark.django_db
def test_a_second_workspace_cannot_start_it_on_the_firsts_world(
    workspace, other_workspace, outsider_client
):
    with schema_context(workspace.schema_name):
        _donation_world(5)
    # The rival's cookies on our host: not signed in here.
    response = outsider_client.post("/train/move-strategy/", {"world": "donations"})
    assert response.status_code in {302, 403}
    assert outsider_client.post(
        "/api/rl/train/move-strategy/", {"pack": "donations"}, content_type="application/json"
    ).status_code in {401, 403}
    # On its own host the rival has no such world: nothing runs on ours.
    rival = client_for(other_workspace, "owner@rival.test")
    api = rival.post(
        "/api/rl/train/move-strategy/", {"pack": "donations"}, content_type="application/json"
    )
    assert api.status_code == 404
    rival.post("/train/move-strategy/", {"world": "donations"})
    with schema_context(other_workspace.schema_name):
        assert not Job.objects.filter(training_run__world__slug="donations").exists()
    with schema_context(workspace.schema_name):
        assert not Job.objects.exists()
