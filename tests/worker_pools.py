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


@contextlib.contextmanager
def workspace_of_its_own(prefix: str) -> Iterator:
    """A committed workspace for a test's worker; the jobs it leaves waiting or running are
    cancelled before the workspace goes."""
    from tests.e2e.workspaces import fresh_workspace

    with fresh_workspace(prefix) as created:
        yield created.workspace
        cancel_active_jobs(created.workspace)


def cancel_active_jobs(workspace) -> None:
    """Cancel the workspace's jobs still waiting or running, so a test's worker leaves none."""
    from levers9.jobs.models import Job
    from levers9.jobs.services import JobError, job_cancel

    with schema_context(workspace.schema_name):
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            with contextlib.suppress(JobError):  # it ended meanwhile
                job_cancel(job=job)


def q_learning_spec(*, episodes: int, time_budget_s: int = 0) -> dict:
    """An Engines q-learning spec on one scenario, in batches of 64 episodes: a few hundred end
    within seconds; 50 million outlast any test, which stops or cancels the job."""
    return {
        "algorithm": "q-learning-online",
        "knobs": {"episodes": episodes, "batch_episodes": 64, "time_budget_s": time_budget_s},
        "scenarios": ["young-professional-price"],
    }
