"""Fair shares with the real worker (issue 15's "Done when"): one workspace holds 50 queued jobs
on a one-card pool; a second workspace's new job starts within two job lengths, not behind
the fifty.

A real django-q2 cluster serves the pool and a real web server (daphne with the dashboard's
job watcher) follows the jobs; rows are committed, in two workspaces of their own.
"""

from __future__ import annotations

import statistics

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from levers9.models import Workspace
from tests.e2e.workspaces import fresh_workspace
from tests.processes import free_port, start_web, start_worker, stop, wait_until
from tests.worker_pools import cancel_active_jobs, pool_of_its_own, q_learning_spec

pytestmark = pytest.mark.slow

QUEUED = 50
SPEC = q_learning_spec(episodes=256)


def _start(workspace, pool) -> int:
    with schema_context(workspace.schema_name):
        return job_start(kind="engines", trainer="q-learning-online", spec=SPEC, pool=pool).pk


def _started(workspace, job_ids: list[int]) -> list[Job]:
    with schema_context(workspace.schema_name):
        return list(Job.objects.filter(pk__in=job_ids, started_at__isnull=False))


@pytest.fixture
def one_card_pool(committed_db):
    with pool_of_its_own("fair", card_type="L4", position=60) as pool:
        yield pool


def test_a_second_workspace_starts_within_two_job_lengths(one_card_pool):
    with fresh_workspace("busy") as busy_created, fresh_workspace("quiet") as quiet_created:
        busy, quiet = busy_created.workspace, quiet_created.workspace
        # An operator let the busy workspace queue more than the default limit.
        Workspace.objects.filter(pk=busy.pk).update(queued_jobs_limit=QUEUED + 10)
        # All fifty are in line before the worker runs the first: when the quiet workspace
        # asks, one of them runs and 49 wait.
        busy_ids = [_start(busy, one_card_pool) for _ in range(QUEUED)]
        worker = start_worker(cluster=one_card_pool.cluster_name, workers=1)
        web = start_web(free_port())
        try:
            wait_until(
                lambda: _started(busy, busy_ids), timeout=120, what="the busy workspace's first job"
            )
            quiet_id = _start(quiet, one_card_pool)
            (quiet_job,) = wait_until(
                lambda: _started(quiet, [quiet_id]), timeout=300, what="the quiet workspace's job"
            )
            # The job length: start to start on the card, measured on the jobs that ran.
            starts = wait_until(
                lambda: (
                    len(ran := _started(busy, busy_ids) + [quiet_job]) >= 4
                    and sorted(job.started_at for job in ran)
                ),
                timeout=300,
                what="four jobs to start, to measure a job's length",
            )
            job_length = statistics.median(
                (later - earlier).total_seconds()
                for earlier, later in zip(starts, starts[1:], strict=False)
            )
            waited = (quiet_job.started_at - quiet_job.created_at).total_seconds()
            busy_ahead = [
                job.pk
                for job in _started(busy, busy_ids)
                if quiet_job.created_at < job.started_at < quiet_job.started_at
            ]
            assert waited <= 2 * job_length, (
                f"waited {waited:.1f}s behind busy jobs {busy_ahead}; a job lasts {job_length:.1f}s"
            )
            # First come, first served would have run the 49 waiting first.
            assert len(busy_ahead) <= 1, busy_ahead
        finally:
            cancel_active_jobs(busy)
            cancel_active_jobs(quiet)
            stop(web)
            stop(worker)
            connection.set_schema_to_public()
