"""A pool served by two worker machines (issue 42, point 6).

Two django-q2 clusters serve one two-card pool through one Redis, each as a machine of its own
(LEVERS9_HOST_NAME: host-a and host-b, two workers each, so either could run both jobs and
together four): the cards are counted in the database, so two jobs run at once, never three,
on both machines. A dashboard on host-a follows jobs running on host-b (their pids mean nothing
on host-a), adopts them after its own restart, and a cancel from a third machine reaches the
trainer on host-b through the job's state.

Rows are committed, in a workspace of its own, on a pool only these clusters serve.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys

import psutil
import pytest
from django.conf import settings
from django_q.conf import Conf
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_cancel, job_start
from levers9.models import CardAllocation
from tests.conftest import database_url_for_workers
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture
from tests.processes import free_port, start_daphne, stop, wait_until
from tests.worker_pools import (
    pool_of_its_own,
    q_learning_spec,
    workspace_of_its_own,
)

pytestmark = pytest.mark.slow

SHORT = q_learning_spec(episodes=50_000_000, time_budget_s=3)
LONG = q_learning_spec(episodes=50_000_000)


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed: worker machines share their queue on Redis")
    port = free_port()
    process = subprocess.Popen(
        [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", tmp_path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def answers() -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(answers, timeout=20, what="redis-server to answer")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(process, hard=True)


@pytest.fixture
def on_redis(redis_url, monkeypatch):
    """This test process queues on Redis too, as a dashboard of that deployment would."""
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", redis_url)
    return redis_url


@pytest.fixture
def two_card_pool(committed_db):  # noqa: F811 - the fixture imported above
    with pool_of_its_own("hosts", card_type="L4", position=74) as pool:
        pool.card_count = 2
        pool.save(update_fields=["card_count"])
        yield pool


@pytest.fixture
def live_workspace(committed_db):  # noqa: F811
    with workspace_of_its_own("hosts") as workspace:
        yield workspace


def _machine(host: str, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_for_workers(),
        "REDIS_URL": redis_url,
        "LEVERS9_HOST_NAME": host,
        **extra,
    }


def _cluster(host: str, pool, redis_url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=settings.BASE_DIR,
        env=_machine(host, redis_url, LEVERS9_Q_CLUSTER=pool.cluster_name, LEVERS9_Q_WORKERS="2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _dashboard(host: str, redis_url: str) -> subprocess.Popen:
    port = free_port()
    web = start_daphne(port, env=_machine(host, redis_url, LEVERS9_JOB_WATCHER="1"))

    def answers() -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_until(answers, timeout=60, what=f"the dashboard on {host} to answer")
    return web


def _start(workspace, pool, spec: dict) -> int:
    with schema_context(workspace.schema_name):
        return job_start(kind="engines", trainer="q-learning-online", spec=spec, pool=pool).pk


def _jobs(workspace, job_ids: list[int]) -> list[Job]:
    with schema_context(workspace.schema_name):
        return list(Job.objects.filter(pk__in=job_ids).order_by("id"))


def _all_ended(jobs: list[Job]) -> list[Job] | None:
    return jobs if all(job.state in Job.ENDED_STATES for job in jobs) else None


def _host(job: Job) -> str:
    return job.worker.rpartition(":")[0]


def _most_at_once(jobs: list[Job]) -> int:
    """The most jobs that held the pool's cards at one moment: from each job's start on a
    worker to the moment its worker gave the cards back."""
    released = dict(
        CardAllocation.objects.filter(pk__in=[job.card_allocation_id for job in jobs]).values_list(
            "pk", "released_at"
        )
    )
    events = []
    for job in jobs:
        events += [(job.started_at, 1), (released[job.card_allocation_id], -1)]
    at_once = most = 0
    for _, change in sorted(events, key=lambda event: (event[0], event[1])):  # ends first
        at_once += change
        most = max(most, at_once)
    return most


def _trainer_tree(job: Job) -> set[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        guard = psutil.Process(job.trainer_pid)
        return {guard, *guard.children(recursive=True)}
    return set()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_two_machines_run_two_jobs_at_once_on_a_two_card_pool_never_three(
    on_redis, two_card_pool, live_workspace, monkeypatch
):
    host_a = _cluster("host-a", two_card_pool, on_redis)
    host_b = _cluster("host-b", two_card_pool, on_redis)
    dashboard = _dashboard("host-a", on_redis)
    trainers: set[psutil.Process] = set()
    try:
        # --- placement: six short jobs on two cards, two machines with two workers each -------
        short_ids = [_start(live_workspace, two_card_pool, SHORT) for _ in range(6)]
        jobs = wait_until(
            lambda: _all_ended(_jobs(live_workspace, short_ids)),
            timeout=240,
            every=0.5,
            what="six jobs to finish on two machines",
        )
        assert [job.state for job in jobs] == [Job.State.DONE] * 6, [job.error for job in jobs]
        assert all(job.progress_step > 0 for job in jobs)
        ran_on = {_host(job) for job in jobs}
        assert ran_on == {"host-a", "host-b"}, f"the jobs ran on {ran_on}"
        assert _most_at_once(jobs) == 2

        # --- a job on host-b, followed from host-a --------------------------------------------
        stop(host_a)  # only host-b serves the pool now
        long_id = _start(live_workspace, two_card_pool, LONG)
        # Trained on host-b and followed by host-a's dashboard: a job nobody followed yet is
        # taken up by the next dashboard without an adoption, which is not what this checks.
        (job,) = wait_until(
            lambda: [
                job
                for job in _jobs(live_workspace, [long_id])
                if job.progress_step > 0 and job.watcher.startswith("host-a:")
            ],
            timeout=90,
            what="the long job to train on host-b, followed by the dashboard on host-a",
        )
        assert _host(job) == "host-b"
        trainers = _trainer_tree(job)
        # The dashboard on host-a restarts: the new one adopts the job and does not take
        # host-b's worker, whose pid means nothing on host-a, for dead.
        stop(dashboard, hard=True)
        dashboard = _dashboard("host-a", on_redis)
        step = job.progress_step
        (job,) = wait_until(
            lambda: [
                job
                for job in _jobs(live_workspace, [long_id])
                if "Adopted by the dashboard host-a:" in job.notes and job.progress_step > step
            ],
            timeout=120,
            what="the restarted dashboard to adopt the job while host-b trains it",
        )
        assert job.state in (Job.State.RUNNING, Job.State.INTERRUPTED), job.error

        # --- a cancel from a third machine reaches the trainer on host-b ----------------------
        monkeypatch.setenv("LEVERS9_HOST_NAME", "host-c")
        with schema_context(live_workspace.schema_name):
            job_cancel(job=job)
        wait_until(
            lambda: not any(_alive(process) for process in trainers),
            timeout=30,
            what="host-b's runner to stop the cancelled job's trainer",
        )
        (job,) = _jobs(live_workspace, [long_id])
        assert job.state == Job.State.CANCELLED
        assert CardAllocation.objects.get(pk=job.card_allocation_id).state == "released"
    finally:
        stop(dashboard)
        stop(host_a)
        stop(host_b)
        for process in trainers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
