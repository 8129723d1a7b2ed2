"""The CPU pool's lanes, with the real worker and watcher:
- user jobs first: while a background job (a refit nobody clicked) runs and another waits, a
  job a person starts begins beside it, not after it (before the background lane, it sat in
  "Next in line on local-cpu" until the refit ended);
- short work at once: while a person's long job holds the slot and another long job waits for
  it, a job expected to end within two minutes runs to its end beside them (before the short
  lane it stood behind both: a 20-second move strategy waited 15.5 minutes behind a judge fit).

A real django-q2 cluster serves the pool with the workers `manage.py serve` gives it (the slot,
the short lane, the background lane) and a real web server (daphne with the job watcher)
follows the jobs; rows are committed, in a workspace of its own. One test, one cluster: each
start costs the suite seconds.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from tests.e2e.workspaces import fresh_workspace
from tests.processes import free_port, start_web, start_worker, stop, wait_until
from tests.worker_pools import cancel_active_jobs, pool_of_its_own, q_learning_spec

pytestmark = pytest.mark.slow

# A background job that outlasts the test (it is cancelled at the end).
LONG = q_learning_spec(episodes=50_000_000)
SHORT = q_learning_spec(episodes=256)


@pytest.fixture
def cpu_pool(committed_db):
    with pool_of_its_own("lane", card_type="cpu", position=70) as pool:
        yield pool


def _start(
    workspace, pool, spec: dict, *, background: bool = False, expected_seconds: float | None = None
) -> int:
    with schema_context(workspace.schema_name):
        return job_start(
            kind="engines",
            trainer="q-learning-online",
            spec=spec,
            pool=pool,
            background=background,
            expected_seconds=expected_seconds,
        ).pk


def _job(workspace, job_id: int) -> Job:
    with schema_context(workspace.schema_name):
        return Job.objects.get(pk=job_id)


def test_a_persons_job_starts_beside_a_refit_and_short_work_beside_both(cpu_pool):
    with fresh_workspace("lane") as created:
        workspace = created.workspace
        refit = _start(workspace, cpu_pool, LONG, background=True)
        worker = start_worker(cluster=cpu_pool.cluster_name, workers=settings.Q_CLUSTER["workers"])
        web = start_web(free_port())
        try:
            wait_until(
                lambda: _job(workspace, refit).state == Job.State.RUNNING,
                timeout=120,
                what="the background job to run",
            )
            waiting_refit = _start(workspace, cpu_pool, LONG, background=True)
            person = _start(workspace, cpu_pool, LONG)
            started = wait_until(
                lambda: _job(workspace, person).started_at,
                timeout=120,
                what="the person's job to start",
            )
            # It started while the refit ran, and the next refit still waits its turn.
            assert _job(workspace, refit).state == Job.State.RUNNING
            assert _job(workspace, refit).started_at < started
            assert _job(workspace, waiting_refit).state == Job.State.PACKING
            assert "Background:" in _job(workspace, waiting_refit).metrics["waiting_why"]

            waiting_person = _start(workspace, cpu_pool, LONG)
            short = _start(workspace, cpu_pool, SHORT, expected_seconds=30.0)
            wait_until(
                lambda: _job(workspace, short).state == Job.State.DONE,
                timeout=120,
                what="the short job to run to its end",
            )
            # It ran and ended while both long jobs still ran and the others still waited.
            assert _job(workspace, person).state == Job.State.RUNNING
            assert _job(workspace, refit).state == Job.State.RUNNING
            assert _job(workspace, waiting_person).state == Job.State.PACKING
            assert _job(workspace, waiting_refit).state == Job.State.PACKING
        finally:
            cancel_active_jobs(workspace)
            stop(web)
            stop(worker)
            connection.set_schema_to_public()
