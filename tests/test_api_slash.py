"""An API action with or without its trailing slash is the same call: never a 301 that loses
the POST (the README once wrote `POST /api/rl/jobs/{id}/resume`)."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from levers9.jobs.services import job_start
from levers9.pools import pool_default
from policies.canary import live_call_route


@pytest.fixture
def job_id(workspace, django_capture_on_commit_callbacks) -> int:
    with schema_context(workspace.schema_name), django_capture_on_commit_callbacks(execute=False):
        return job_start(
            kind="train",
            trainer="q-learning-online",
            spec={"algorithm": "q-learning-online"},
            pool=pool_default(gpu=False),
        ).pk


def test_it_answers_resume_without_the_slash_as_with_it(owner_client, job_id):
    with_slash = owner_client.post(f"/api/rl/jobs/{job_id}/resume/", {}, "application/json")
    without = owner_client.post(f"/api/rl/jobs/{job_id}/resume", {}, "application/json")
    assert without.status_code not in {301, 302, 308}
    assert (without.status_code, without.json()) == (with_slash.status_code, with_slash.json())


def test_it_runs_a_plain_route_without_the_slash(owner_client, workspace):
    with schema_context(workspace.schema_name):
        live_call_route(call_id="no-slash", world=World.objects.get(slug="lettings"))
    response = owner_client.post(
        "/api/rl/live/calls/no-slash/outcome", {"outcome": "won"}, "application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["outcome"] == "won"


def test_it_serves_a_list_without_the_slash(owner_client):
    assert owner_client.get("/api/rl/calls").status_code == 200
    assert owner_client.get("/api/rl/me").json()["username"] == "owner@acme.test"


def test_it_still_answers_404_for_a_path_that_exists_neither_way(owner_client):
    assert owner_client.post("/api/rl/jobs/1/nothing", {}, "application/json").status_code == 404


def test_it_refuses_another_workspace_without_the_slash(outsider_client, job_id):
    response = outsider_client.post(f"/api/rl/jobs/{job_id}/resume", {}, "application/json")
    assert response.status_code in {401, 403}
