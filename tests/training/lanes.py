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
