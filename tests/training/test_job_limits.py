"""Per-workspace job limits: a job over the queued limit is refused (a 429 naming the limit over
the API, a message on the Train page), the jobs already waiting keep their places, the limit is
the workspace's own, and an operator sets it in the platform admin."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.limit_refusal import JobLimitReached
from levers9.models import CardAllocation, Workspace
from tests.conftest import client_for


@pytest.fixture
def queue_of_one(workspace):
    Workspace.objects.filter(pk=workspace.pk).update(queued_jobs_limit=1)
    return workspace


def _train(client):
    return client.post(
        "/api/rl/train/move-strategy/", {"pack": "lettings"}, content_type="application/json"
    )


def _waiting(workspace) -> list[int]:
    return list(
        CardAllocation.objects.filter(workspace=workspace, state="waiting").values_list(
            "holder_id", flat=True
        )
    )


def test_it_refuses_a_job_over_the_queued_limit_with_a_429(queue_of_one, owner_client):
    # In a test the placement (on commit) never runs: the first job stays in line.
    first = _train(owner_client)
    assert first.status_code == 201
    refused = _train(owner_client)
    assert refused.status_code == 429
    body = refused.json()
    assert body["limit"] == "queued_jobs_limit"
    assert body["limit_value"] == 1
    assert "1 jobs waiting for cards" in body["detail"]
    assert "platform admin" in body["detail"]
    # Nothing saved is lost, and nothing half-made is left.
    assert _waiting(queue_of_one) == [first.json()["id"]]
    with schema_context(queue_of_one.schema_name):
        assert list(Job.objects.values_list("pk", "state")) == [(first.json()["id"], "packing")]


def test_it_counts_the_limit_per_workspace(queue_of_one, owner_client, other_workspace):
    assert _train(owner_client).status_code == 201
    assert _train(owner_client).status_code == 429
    rival = client_for(other_workspace, "owner@rival.test")
    assert _train(rival).status_code == 201
    assert _train(rival).status_code == 201  # its own limit (the default) is not reached


def test_it_says_so_on_the_train_page(queue_of_one, owner_client):
    train_page = "http://acme.localhost/train/"
    owner_client.post("/train/move-strategy/", {"seed": "1"}, HTTP_REFERER=train_page)
    refused = owner_client.post(
        "/train/move-strategy/", {"seed": "2"}, HTTP_REFERER=train_page, follow=True
    )
    assert refused.status_code == 200
    assert refused.redirect_chain[-1][0] == train_page
    page = refused.content.decode()
    assert "its limit (queued_jobs_limit = 1)" in page
    assert len(_waiting(queue_of_one)) == 1


def test_it_does_not_refuse_the_checkpoint_of_a_finished_training(queue_of_one, in_workspace):
    from levers9.jobs.services import job_start
    from levers9.pools import pool_default

    start = {"kind": "engines", "trainer": "q-learning-online", "spec": {}}
    job_start(**start, pool=pool_default(gpu=False))
    with pytest.raises(JobLimitReached):
        job_start(**start, pool=pool_default(gpu=False))
    job_start(**start, pool=pool_default(gpu=False), within_workspace_limits=False)
    assert len(_waiting(queue_of_one)) == 2


def test_an_operator_sets_the_limits_in_the_platform_admin(operator_client, workspace):
    listing = operator_client.get("/admin/levers9/workspace/?q=acme")
    assert listing.status_code == 200
    assert "Jobs waiting · running" in listing.content.decode()
    saved = operator_client.post(
        "/admin/levers9/workspace/?q=acme",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": str(workspace.pk),
            "form-0-queued_jobs_limit": "7",
            "form-0-running_jobs_limit": "2",
            "_save": "Save",
        },
    )
    assert saved.status_code == 302
    workspace.refresh_from_db()
    assert (workspace.queued_jobs_limit, workspace.running_jobs_limit) == (7, 2)


def test_a_workspace_owner_cannot_set_its_own_limits(owner_client, workspace):
    assert owner_client.get("/admin/levers9/workspace/").status_code in {302, 403, 404}
    workspace.refresh_from_db()
    assert workspace.queued_jobs_limit == 20
