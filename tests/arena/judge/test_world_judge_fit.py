"""A world fits its judge with one call and the scoring API then answers with the new version;
the fit never sees the calls Evaluate holds out; another workspace can neither fit nor score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django_tenants.utils import schema_context

from arena.held_out import HELD_OUT_CALLS, held_out_call_ids
from arena.judge.fit_job import judge_fit_finish, judge_fit_start
from arena.judge.fit_rows import judge_fit_rows
from arena.judge.world_dimensions import world_dimension_names
from arena.models import Call, JudgeVersion, World
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.judge import fit as judge_fit

# Enough calls to hold forty out and learn from the rest, few enough for a quick fit.
CALLS = 2 * HELD_OUT_CALLS + 40


@pytest.fixture
def persuasion(in_workspace, datasets):
    world = world_create(slug="persuasion", name="Persuasion for good")
    lines = PERSUASION_CALLS.read_text().splitlines()[:CALLS]
    calls_import(world=world, text="\n".join(lines), source="test")
    return world


@pytest.fixture
def datasets(settings, tmp_path):
    return settings.DATASETS_DIR


def _fit_now(job: Job) -> dict:
    """What the worker does: the trainer on the job's spec (here, in this process)."""
    spec = json.loads(Path(job.spec_path).read_text())
    return judge_fit.run(spec)


def test_the_fit_never_sees_a_held_out_call(persuasion):
    held = set(
        Call.objects.filter(pk__in=held_out_call_ids(world=persuasion)).values_list(
            "external_id", flat=True
        )
    )
    assert len(held) == HELD_OUT_CALLS
    rows = judge_fit_rows(persuasion)
    groups = {row["group"] for row in rows["outcomes"]}
    assert groups
    assert groups.isdisjoint(held)


def test_a_world_fits_with_one_call_and_the_scoring_api_answers_with_the_new_version(
    persuasion, owner_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = owner_client.post("/api/rl/packs/persuasion/judge/fit/")
    assert response.status_code == 202, response.content
    with schema_context("ws_acme"):
        job = Job.objects.get(pk=response.json()["id"])
        assert (job.kind, job.trainer) == ("judge-fit", "judge-fit")
        judge_fit_finish(job, _fit_now(job))
        version = JudgeVersion.objects.get(world=persuasion)
        assert version.number == 1
        assert version.report["held_out"]["outcome_turns"] > 0
        assert World.objects.get(pk=persuasion.pk).judge_label.startswith("fitted v1")

    items = [
        {
            "dialogue": [{"speaker": "customer", "text": "Hi, what is this about?"}],
            "reply": "Would you consider giving part of your payment to Save the Children?",
        },
        {"dialogue": [], "reply": "Hello! How are you today?"},
    ]
    scored = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", {"items": items}, content_type="application/json"
    )
    assert scored.status_code == 200, scored.content
    body = scored.json()
    assert body["judge"].startswith("fitted v1")
    assert len(body["results"]) == 2
    for result in body["results"]:
        assert 0 <= result["total"] <= 1
        assert 0 <= result["won_probability"] <= 1
        assert set(result["scores"]) == set(world_dimension_names(persuasion))


def test_picks_frozen_while_a_fit_runs_are_fitted_once_it_ends(
    persuasion, django_capture_on_commit_callbacks
):
    from django.contrib.auth import get_user_model

    from arena.services.freeze import preference_freeze
    from arena.services.preferences import preferences_import
    from levers9.jobs.kinds import job_kind

    def fits():
        return list(
            Job.objects.filter(kind="judge-fit", arena_world__world=persuasion).order_by("pk")
        )

    def end(job):  # what the platform does once the worker is done with it
        judge_fit_finish(job, _fit_now(job))
        Job.objects.filter(pk=job.pk).update(state=Job.State.DONE)
        with django_capture_on_commit_callbacks(execute=True):
            job_kind("judge-fit").on_end(Job.objects.get(pk=job.pk))

    with django_capture_on_commit_callbacks(execute=False):
        first = judge_fit_start(world=persuasion)
    # It runs (a worker took it): what it fits was read before the picks existed.
    Job.objects.filter(pk=first.pk).update(
        state=Job.State.RUNNING, submitted_at=first.created_at, task_id="task-first"
    )
    preferences_import(
        world=persuasion, text="\n".join(HH_RLHF_PAIRS.read_text().splitlines()[:60])
    )
    with django_capture_on_commit_callbacks(execute=False) as refits:
        preference_freeze(
            world=persuasion, by=get_user_model().objects.get(username="owner@acme.test")
        )
    with django_capture_on_commit_callbacks(execute=False):  # the refit, not its placement
        for callback in refits:
            callback()
    # Picks frozen while it runs add nothing now (no world's rows read inside the freeze).
    assert fits() == [first]
    assert not _spec(first)["pairs"]

    end(first)  # it read its rows before the picks existed: its end refits, in the background
    first, second = fits()
    assert second.background
    assert len(_spec(second)["pairs"]) > 0  # the refit reads the frozen picks

    end(second)  # nothing new since it read its rows: no third fit
    assert len(fits()) == 2


def _spec(job: Job) -> dict:
    return json.loads(Path(job.spec_path).read_text())


def test_the_scoring_api_names_the_bad_field(persuasion, owner_client):
    bad = {"items": [{"dialogue": [{"speaker": "robot", "text": "hi"}], "reply": "Hello"}]}
    response = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", bad, content_type="application/json"
    )
    assert response.status_code == 400
    assert "items[0].dialogue[0].speaker" in response.json()["detail"]
    too_many = {"items": [{"dialogue": [], "reply": "hi"}] * 1001}
    response = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", too_many, content_type="application/json"
    )
    assert response.status_code == 400
    assert "at most 1000" in response.json()["detail"]
    # A misnamed call is refused, not scored as a call's opening line.
    misnamed = {"items": [{"context": [{"speaker": "customer", "text": "Hi"}], "reply": "Hello"}]}
    response = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", misnamed, content_type="application/json"
    )
    assert response.status_code == 400
    assert "items[0].context is not a field" in response.json()["detail"]
    assert "'dialogue'" in response.json()["detail"]


def test_the_rubric_answers_until_a_world_has_a_fitted_version(persuasion, owner_client):
    response = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/",
        {"items": [{"dialogue": [], "reply": "Hello there"}]},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.json()["judge"] == "rubric-v1"
    assert response.json()["results"][0]["won_probability"] is None


@pytest.mark.parametrize("action", ["fit", "score"])
def test_another_workspace_can_neither_fit_nor_score(persuasion, outsider_client, action):
    response = outsider_client.post(
        f"/api/rl/packs/persuasion/judge/{action}/",
        {"items": [{"dialogue": [], "reply": "hi"}]},
        content_type="application/json",
    )
    assert response.status_code in {401, 403}
    with schema_context("ws_acme"):
        assert not Job.objects.filter(kind="judge-fit").exists()
