"""An evaluation expected to run over two minutes says how long and asks to be confirmed, on
the Evaluate page and in the admin's "run again"; a short one starts at once, as before. The
estimate reads this world's past evaluations of the same kind, else what the versions ask of a
model."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tenants.utils import schema_context

from evaluation.call_sets import call_set_ensure
from evaluation.estimates import evaluation_estimate
from evaluation.models import Evaluation
from levers9.jobs.models import Job
from policies.models import PolicyVersion


@pytest.fixture
def on_a_model(pushy):
    """The pushy version answering through a (loopback, never called here) vLLM endpoint."""
    PolicyVersion.objects.filter(pk=pushy.pk).update(
        provider=PolicyVersion.Provider.VLLM,
        endpoint_url="http://127.0.0.1:9/v1",
        provider_model="agent",
    )
    pushy.refresh_from_db()
    return pushy


def _evaluation(world, candidate, baseline) -> Evaluation:
    """A finished evaluation (one still on its way would be joined, not run again)."""
    return Evaluation.objects.create(
        world=world,
        call_set=call_set_ensure(world=world),
        candidate=candidate,
        baseline=baseline,
        state=Evaluation.State.DONE,
    )


def _post(client, lettings, candidate, baseline, **extra):
    return client.post(
        f"/evaluate/?world={lettings.slug}",
        {"world": lettings.slug, "candidate": candidate.pk, "baseline": baseline.pk, "seed": 0}
        | extra,
    )


def test_two_simulator_versions_start_at_once(lettings, pushy, baseline):
    estimate = evaluation_estimate(world=lettings, candidate=pushy, baseline=baseline)
    assert not estimate.needs_confirming
    assert "neither version asks a model" in estimate.sentence()


def test_a_version_on_a_model_with_no_past_run_asks_to_be_confirmed(
    owner_client, workspace, lettings, on_a_model, baseline, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        asked = _post(owner_client, lettings, on_a_model, baseline)
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Expected to run an unknown time" in page
    assert f"{on_a_model.label} asks a model" in page
    assert 'name="confirm" value="1"' in page
    with schema_context(workspace.schema_name):
        assert not Evaluation.objects.exists()  # nothing started by the first click
    with django_capture_on_commit_callbacks(execute=False):
        confirmed = _post(owner_client, lettings, on_a_model, baseline, confirm="1")
    assert confirmed.status_code == 302
    with schema_context(workspace.schema_name):
        assert Evaluation.objects.get().candidate_id == on_a_model.pk


def test_the_estimate_reads_past_evaluations_of_the_same_kind(
    lettings, on_a_model, baseline, pushy
):
    job = Job.objects.create(
        kind="evaluate",
        trainer="evaluate",
        title="an earlier evaluation",
        state=Job.State.DONE,
        pool_name="local-cpu",
        started_at=timezone.now() - timedelta(minutes=12),
        finished_at=timezone.now(),
    )
    Evaluation.objects.create(
        world=lettings,
        call_set=call_set_ensure(world=lettings),
        candidate=on_a_model,
        baseline=baseline,
        job=job,
        state="done",
    )
    estimate = evaluation_estimate(world=lettings, candidate=on_a_model, baseline=baseline)
    assert estimate.needs_confirming
    assert estimate.span() == "about 12 minutes"
    assert "from the last run of an evaluation like this one in" in estimate.basis


def test_the_admins_run_again_asks_first_for_a_long_one(
    owner_client, workspace, lettings, on_a_model, baseline, django_capture_on_commit_callbacks
):
    first = _evaluation(lettings, on_a_model, baseline)
    body = {"action": "run_again", "_selected_action": [first.pk]}
    with django_capture_on_commit_callbacks(execute=False):
        asked = owner_client.post("/admin/evaluation/evaluation/", body)
    assert asked.status_code == 200
    assert "Expected to run an unknown time" in asked.content.decode()
    with schema_context(workspace.schema_name):
        assert Evaluation.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=False):
        confirmed = owner_client.post("/admin/evaluation/evaluation/", body | {"post": "yes"})
    assert confirmed.status_code == 302
    with schema_context(workspace.schema_name):
        assert Evaluation.objects.count() == 2


def test_another_workspace_cannot_confirm_one(outsider_client, lettings, on_a_model, baseline):
    first = _evaluation(lettings, on_a_model, baseline)
    response = outsider_client.post(
        "/admin/evaluation/evaluation/",
        {"action": "run_again", "_selected_action": [first.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
    assert Evaluation.objects.count() == 1
