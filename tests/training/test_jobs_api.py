"""The jobs API: list, resume and cancel; the Train card and Engines runs; outsiders refused."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from levers9.pools import pool_default
from tests.conftest import api_token, token_client


@pytest.fixture
def job_id(workspace, django_capture_on_commit_callbacks):
    with schema_context(workspace.schema_name), django_capture_on_commit_callbacks(execute=False):
        return job_start(
            kind="engines",
            trainer="q-learning-online",
            spec={"algorithm": "q-learning-online"},
            pool=pool_default(gpu=False),
        ).pk


def test_it_lists_and_shows_jobs(owner_client, job_id):
    listing = owner_client.get("/api/rl/jobs/").json()
    assert [row["id"] for row in listing["results"]] == [job_id]
    assert owner_client.get(f"/api/rl/jobs/{job_id}/").json()["state"] == "packing"


def test_it_cancels_through_the_api_and_says_why_it_cannot_resume(owner_client, job_id):
    refused = owner_client.post(
        f"/api/rl/jobs/{job_id}/resume/", {}, content_type="application/json"
    )
    assert refused.status_code == 409
    assert "only an interrupted job can be resumed" in refused.json()["detail"]
    cancelled = owner_client.post(f"/api/rl/jobs/{job_id}/cancel/")
    assert cancelled.json()["state"] == "cancelled"
    again = owner_client.post(f"/api/rl/jobs/{job_id}/cancel/")
    assert again.status_code == 409


def test_it_refuses_another_workspace_the_jobs(outsider_client, job_id, workspace):
    assert outsider_client.get(f"/api/rl/jobs/{job_id}/").status_code in {401, 403}
    assert outsider_client.post(f"/api/rl/jobs/{job_id}/cancel/").status_code in {401, 403}
    assert outsider_client.post(f"/api/rl/jobs/{job_id}/resume/").status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert Job.objects.get(pk=job_id).state == "packing"


def test_it_does_not_let_a_rival_token_see_our_jobs(other_workspace, job_id):
    own = token_client(other_workspace, api_token(other_workspace, "owner@rival.test"))
    assert own.get("/api/rl/jobs/").json()["count"] == 0
    assert own.get(f"/api/rl/jobs/{job_id}/").status_code == 404


def test_it_starts_the_move_strategy_card_and_an_engines_run(owner_client, workspace):
    card = owner_client.post(
        "/api/rl/train/move-strategy/", {"pack": "lettings"}, content_type="application/json"
    )
    assert card.status_code == 201, card.content
    assert card.json()["trainer"] == "q-learning-online"
    assert card.json()["parent_version"] == 1
    bad = owner_client.post(
        "/api/rl/engines/runs/",
        {"algorithm": "ppo", "pack": "lettings", "knobs": {"clip_range": -1}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert bad.json()["knob"] == "clip_range"
    good = owner_client.post(
        "/api/rl/engines/runs/",
        {"algorithm": "ppo", "pack": "lettings", "knobs": {"iterations": 5}},
        content_type="application/json",
    )
    assert good.status_code == 201
    with schema_context(workspace.schema_name):
        assert Job.objects.filter(kind="engines").count() == 1
    not_done = owner_client.post(f"/api/rl/engines/runs/{good.json()['id']}/promote/")
    assert not_done.status_code == 409


def test_it_shows_the_train_page_with_live_progress(owner_client, job_id):
    page = owner_client.get("/train/").content.decode()
    assert f'data-job="{job_id}"' in page
    assert "jobs.js" in page
    assert "Move strategy" in page
    detail = owner_client.get(f"/train/jobs/{job_id}/").content.decode()
    assert "Cancel" in detail
