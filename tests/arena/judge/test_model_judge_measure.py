"""A world's model judge is measured on the picks its fit holds out, asked in both orders: a
model that prefers a position gets only ties and a position-consistency of zero."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context

from arena.errors import JudgeFitError
from arena.judge import agreement
from arena.judge.agreement import judge_measure_run, judge_measure_start, judge_measurement_latest
from arena.judge.fit_job import judge_fit_soon
from arena.judge.world_judge_choice import world_judge_set
from arena.models import World
from arena.services.freeze import preference_freeze
from arena.services.preferences import preferences_import
from levers9.jobs.models import Job
from levers9.shipped_data import HH_RLHF_PAIRS
from trainers.judge.model_judge import ModelJudge


class _AlwaysTheFirst:
    def reply(self, messages, *, max_tokens=0):
        return json.dumps({"better": 1})


@pytest.fixture
def model_judged(in_workspace, monkeypatch):
    # The judge's host as an operator would allow it (it is never called: the model is a stub).
    monkeypatch.setenv("LEVERS9_ENDPOINT_ALLOWED_HOSTS", "judge")
    world = World.objects.get(slug="lettings")
    preferences_import(world=world, text="\n".join(HH_RLHF_PAIRS.read_text().splitlines()[:80]))
    owner = get_user_model().objects.get(username="owner@acme.test")
    preference_freeze(world=world, by=owner)
    world = world_judge_set(
        world=world, provider="vllm", model="judge-model", endpoint_url="http://judge:8000/v1"
    )
    monkeypatch.setattr(
        agreement,
        "model_judge_for_world",
        lambda _world: ModelJudge(_AlwaysTheFirst(), model_name="vllm:judge-model"),
    )
    return world


def test_it_measures_a_model_judge_in_both_orders_on_held_out_picks(
    model_judged, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        job = judge_measure_start(world=model_judged)
    result = judge_measure_run(job.pk, lambda step, total, **metrics: None)
    model = result["model"]
    assert 0 < model["pairs"] <= 80
    assert model["ties"] == model["pairs"]  # one position every time: never a verdict
    assert model["position_consistency"] == 0.0
    assert result["rubric"]["pairs"] == model["pairs"]
    Job.objects.filter(pk=job.pk).update(state=Job.State.DONE, result=result)
    assert judge_measurement_latest(model_judged)["judge"] == "vllm:judge-model"


def test_the_rubric_or_fitted_judge_is_measured_by_its_fit_not_here(in_workspace):
    with pytest.raises(JudgeFitError, match="its fit measures it"):
        judge_measure_start(world=World.objects.get(slug="lettings"))


def test_another_workspace_cannot_start_a_measurement(outsider_client, workspace):
    response = outsider_client.post("/environment/lettings/measure/")
    assert response.status_code in {302, 403}
    with schema_context(workspace.schema_name):
        assert not Job.objects.filter(kind="judge-measure").exists()


def test_the_api_starts_a_measurement_and_shows_the_newest(
    model_judged, owner_client, django_capture_on_commit_callbacks
):
    assert owner_client.get("/api/rl/packs/lettings/judge/measurement/").json() == {
        "measurement": None
    }
    with django_capture_on_commit_callbacks(execute=False):
        response = owner_client.post("/api/rl/packs/lettings/judge/measure/")
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    result = judge_measure_run(job_id, lambda step, total, **metrics: None)
    Job.objects.filter(pk=job_id).update(state=Job.State.DONE, result=result)
    shown = owner_client.get("/api/rl/packs/lettings/judge/measurement/").json()["measurement"]
    assert shown["judge"] == "vllm:judge-model"
    assert shown["model"]["position_consistency"] == 0.0


def test_the_api_refuses_to_measure_a_fitted_judge_with_a_reason(in_workspace, owner_client):
    response = owner_client.post("/api/rl/packs/lettings/judge/measure/")
    assert response.status_code == 400
    assert "its fit measures it" in response.json()["detail"]


def test_a_freeze_measures_a_model_judge_again_by_itself(
    model_judged, django_capture_on_commit_callbacks
):
    # What a freeze calls once it commits: the refit, and for a model-judged world a new
    # measurement; said twice, still one measurement waiting.
    with django_capture_on_commit_callbacks(execute=True):
        judge_fit_soon(world_ids={model_judged.pk})
    with django_capture_on_commit_callbacks(execute=True):
        judge_fit_soon(world_ids={model_judged.pk})
    assert Job.objects.filter(kind="judge-measure", arena_world__world=model_judged).count() == 1
    assert Job.objects.filter(kind="judge-fit", arena_world__world=model_judged).exists()


def test_a_freeze_measures_nothing_where_the_fitted_judge_rules(
    in_workspace, django_capture_on_commit_callbacks
):
    world = World.objects.get(slug="lettings")
    with django_capture_on_commit_callbacks(execute=True):
        judge_fit_soon(world_ids={world.pk})
    assert not Job.objects.filter(kind="judge-measure").exists()


def test_another_workspace_cannot_measure_or_read_over_the_api(outsider_client, workspace):
    assert outsider_client.post("/api/rl/packs/lettings/judge/measure/").status_code in {
        401,
        403,
        404,
    }
    assert outsider_client.get("/api/rl/packs/lettings/judge/measurement/").status_code in {
        401,
        403,
        404,
    }
    with schema_context(workspace.schema_name):
        assert not Job.objects.filter(kind="judge-measure").exists()
