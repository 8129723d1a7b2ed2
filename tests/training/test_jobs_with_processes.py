"""Reliability checks with real processes: a real worker (django-q2 cluster), a real web
server (daphne with the dashboard's job watcher), real trainer subprocesses, SIGKILL.

Rows are committed (the processes are other connections), in a workspace of their own
that is dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from arena.models import World
from levers9.jobs.models import Job
from levers9.models import CardAllocation, Domain, Workspace
from levers9.services import workspace_create
from policies.models import PolicyVersion
from tests.conftest import PASSWORD
from tests.processes import free_port, start_web, start_worker, stop, wait_until
from tests.worker_pools import q_learning_spec
from training.cards import train_move_strategy

pytestmark = pytest.mark.slow


@pytest.fixture
def live_workspace(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        slug = f"jobs-{uuid.uuid4().hex[:8]}"
        created = workspace_create(slug=slug, admin_email="boss@jobs.test", password=PASSWORD)
        yield created.workspace
        connection.set_schema_to_public()
        CardAllocation.objects.filter(workspace=created.workspace).delete()
        Domain.objects.filter(tenant=created.workspace).delete()
        Workspace.objects.get(pk=created.workspace.pk).delete(force_drop=True)


def _job(schema: str, job_id: int) -> Job:
    with schema_context(schema):
        return Job.objects.select_related("training_run__produced_version").get(pk=job_id)


def _start_move_strategy(workspace) -> int:
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
        return train_move_strategy(world=world, parent=parent, seed=1).pk


def test_it_finishes_a_job_once_when_the_web_process_is_killed_mid_run(live_workspace):
    schema = live_workspace.schema_name
    worker = start_worker()
    web = start_web(free_port())
    try:
        job_id = _start_move_strategy(live_workspace)
        # The dashboard follows the job (its watcher is on the record) and it is training.
        wait_until(
            lambda: (job := _job(schema, job_id)).progress_step > 0 and job.watcher,
            timeout=90,
            what="progress, followed by the dashboard",
        )
        # The dashboard dies hard mid-run; the trainer carries on headless on the worker.
        stop(web, hard=True)
        step_when_killed = _job(schema, job_id).progress_step
        wait_until(
            lambda: (
                _job(schema, job_id).progress_step > step_when_killed
                or _job(schema, job_id).progress_step == _job(schema, job_id).progress_total
            ),
            timeout=60,
            what="the trainer to carry on without the dashboard",
        )
        web = start_web(free_port())
        job = wait_until(
            lambda: (job := _job(schema, job_id)).state in Job.ENDED_STATES and job,
            timeout=180,
            what="the restarted dashboard to adopt and finish the job",
        )
        assert job.state == Job.State.DONE, job.error
        assert "Adopted by the dashboard" in job.notes
        with schema_context(schema):
            assert PolicyVersion.objects.count() == 2
            version = PolicyVersion.objects.get(number=2)
            assert version.parent.number == 1
            assert version.learned_from["job"] == job_id
        assert job.training_run.produced_version == version
    finally:
        stop(web)
        stop(worker)


def test_it_fails_a_job_whose_worker_is_killed_and_frees_its_cards(live_workspace):
    schema = live_workspace.schema_name
    worker = start_worker()
    web = start_web(free_port())
    try:
        job_id = _start_move_strategy(live_workspace)
        job = wait_until(
            lambda: (job := _job(schema, job_id)).progress_step > 0 and job.trainer_pid and job,
            timeout=90,
            what="the trainer to run",
        )
        # The worker node dies: the cluster and the process running the task, all at once.
        stop(worker, hard=True)
        worker_pid = int(job.worker.split(":")[1])
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker_pid, signal.SIGKILL)
        job = wait_until(
            lambda: (job := _job(schema, job_id)).state in Job.ENDED_STATES and job,
            timeout=60,
            what="the dashboard to notice the dead worker",
        )
        assert job.state == Job.State.FAILED
        assert "stopped before the trainer finished" in job.error
        assert CardAllocation.objects.get(pk=job.card_allocation_id).state == "released"
        with schema_context(schema):
            assert PolicyVersion.objects.count() == 1
        # The orphaned trainer was stopped too.
        wait_until(lambda: not _alive(job.trainer_pid), timeout=20, what="the trainer to stop")
    finally:
        stop(web)
        stop(worker, hard=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_it_runs_fifty_jobs_on_a_one_card_pool_one_at_a_time_in_order(live_workspace):
    from levers9.jobs.services import job_start
    from levers9.models import GpuPool

    schema = live_workspace.schema_name
    # An operator let this workspace queue more than the default limit allows.
    Workspace.objects.filter(pk=live_workspace.pk).update(queued_jobs_limit=60)
    cluster = f"one-card-{uuid.uuid4().hex[:6]}"
    pool = GpuPool.objects.create(
        name=cluster, card_type="L4", card_count=1, cluster_name=cluster, position=50
    )
    worker = start_worker(cluster=cluster, workers=2)
    web = start_web(free_port())
    spec = q_learning_spec(episodes=256)
    try:
        with schema_context(schema):
            job_ids = [
                job_start(kind="engines", trainer="q-learning-online", spec=spec, pool=pool).pk
                for _ in range(int(os.environ.get("FIFTY", 50)))
            ]
        wait_until(
            lambda: all(_job(schema, job_id).state in Job.ENDED_STATES for job_id in job_ids),
            timeout=600,
            every=1.0,
            what="fifty jobs to finish",
        )
        with schema_context(schema):
            jobs = list(Job.objects.filter(pk__in=job_ids).order_by("id"))
        assert [job.state for job in jobs] == [Job.State.DONE] * len(job_ids)
        assert [job.pk for job in sorted(jobs, key=lambda job: job.started_at)] == job_ids
        held = sorted(
            CardAllocation.objects.filter(pool=pool), key=lambda allocation: allocation.granted_at
        )
        assert [allocation.holder_id for allocation in held] == job_ids
        for earlier, later in zip(held, held[1:], strict=False):
            assert later.granted_at >= earlier.released_at, "a card was double-booked"
    finally:
        stop(web)
        stop(worker)
        CardAllocation.objects.filter(pool=pool).delete()
        pool.delete()
