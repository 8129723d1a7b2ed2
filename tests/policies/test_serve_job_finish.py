"""A serve job through the platform's finish: the endpoint serves and keeps its cards after
the job ends: the platform's finish runs the serve kind that policies registers."""

from __future__ import annotations

import pytest

from levers9.jobs.kinds import job_kind
from levers9.jobs.models import Job
from levers9.jobs.services import job_finish
from levers9.models import CardAllocation
from levers9.pools import cards_try_grant
from policies.endpoints import version_serve
from policies.models import Endpoint, PolicyVersion
from policies.selectors import versions_list
from tests.worker_tasks import worker_task_done


@pytest.fixture
def serve_hook():
    """The serve kind's finish, as policies registers it with the job platform."""
    kind = job_kind("serve")
    assert kind.finish is not None
    assert kind.keeps_cards
    return kind


def test_it_keeps_the_cards_after_the_serve_job_is_done(
    trained_version, gpu_pool, serve_trainer, serve_hook
):
    endpoint = version_serve(version=trained_version, gpu_count=4, pool_name=gpu_pool.name)
    assert cards_try_grant(allocation_id=endpoint.card_allocation_id)
    job = Job.objects.get(pk=endpoint.job_id)
    worker_task_done(
        job,
        {
            "engine": "vllm",
            "url": "http://gpu-node-1:8123/v1",
            "served_model": "v2",
            "pid": 4242,
            "host": "gpu-node-1",
            "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
            "log_path": "/var/log/v2.log",
        },
    )
    assert job_finish(job_id=job.pk) is True
    job.refresh_from_db()
    endpoint.refresh_from_db()
    assert job.state == Job.State.DONE
    assert endpoint.state == Endpoint.State.SERVING
    assert (endpoint.url, endpoint.pid, endpoint.host) == (
        "http://gpu-node-1:8123/v1",
        4242,
        "gpu-node-1",
    )
    assert CardAllocation.objects.get(pk=endpoint.card_allocation_id).state == "held"
    assert PolicyVersion.objects.get(pk=trained_version.pk).can_answer


def test_it_fails_the_endpoint_when_the_serve_job_fails(
    trained_version, gpu_pool, serve_trainer, serve_hook
):
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    job = Job.objects.get(pk=endpoint.job_id)
    worker_task_done(job, {"engine": "vllm", "url": ""})  # no address: the finish refuses it
    assert job_finish(job_id=job.pk) is False
    assert Job.objects.get(pk=job.pk).state == Job.State.FAILED
    assert CardAllocation.objects.get(pk=endpoint.card_allocation_id).state == "released"
    versions_list(world=None)  # the next list read sees the failed job
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.FAILED
    assert "no address" in endpoint.error
