"""Committed rows for tests that run a real worker: a pool that only the test's own worker
serves, and the jobs it leaves waiting or running cancelled at the end."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.db import connection
from django_tenants.utils import schema_context


@contextlib.contextmanager
def pool_of_its_own(prefix: str, *, card_type: str, position: int) -> Iterator:
    """A committed one-card pool on a cluster of its own, so that only the test's own worker
    serves it; removed afterwards with the cards it lent."""
    from levers9.models import CardAllocation, GpuPool

    cluster = f"{prefix}-{uuid.uuid4().hex[:6]}"
    pool = GpuPool.objects.create(
        name=cluster, card_type=card_type, card_count=1, cluster_name=cluster, position=position
    )
    try:
        yield pool
    finally:
        connection.set_schema_to_public()
        CardAllocation.objects.filter(pool=pool).delete()
        pool.delete()


def cancel_active_jobs(workspace) -> None:
    """Cancel the workspace's jobs still waiting or running, so a test's worker leaves none."""
    from levers9.jobs.models import Job
    from levers9.jobs.services import JobError, job_cancel

    with schema_context(workspace.schema_name):
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            with contextlib.suppress(JobError):  # it ended meanwhile
                job_cancel(job=job)
