"""A CPU pool's lanes as the lane tests drive them: an Engines job started in a workspace, placed
as the watcher places it, and read back, each in the workspace's schema."""

from __future__ import annotations

from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_place, job_start


def lane_job_start(workspace, pool, **options) -> Job:
    """A job as its starter makes it; its placement is left to the test (as the watcher's)."""
    with schema_context(workspace.schema_name):
        return job_start(
            kind="engines",
            trainer="q-learning-online",
            spec={"algorithm": "x"},
            pool=pool,
            **options,
        )


def lane_job_place(workspace, job: Job) -> bool:
    with schema_context(workspace.schema_name):
        return job_place(job_id=job.pk)


def lane_job_read(workspace, job: Job) -> Job:
    with schema_context(workspace.schema_name):
        return Job.objects.get(pk=job.pk)


def lane_second_waiting(workspace, pool, capture_on_commit, **options) -> tuple[Job, Job, str]:
    """Two alike jobs in one lane: the first placed, the second left waiting; both jobs, and why
    the second says it waits."""
    with capture_on_commit(execute=False):
        first = lane_job_start(workspace, pool, **options)
        second = lane_job_start(workspace, pool, **options)
    assert lane_job_place(workspace, first)
    assert not lane_job_place(workspace, second)
    return first, second, lane_job_read(workspace, second).metrics["waiting_why"]
