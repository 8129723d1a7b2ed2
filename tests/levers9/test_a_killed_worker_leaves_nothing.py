"""A worker that dies leaves nothing behind (issue 42, point 5).

`kill -9` on the django-q2 cluster's main process used to leave its sentinel, pusher, monitor
and workers running (and the trainer a worker had started): serve started a new worker beside
them, and Ctrl+C on serve left them looping on connection errors. Here, with real processes on
this test run's database: serve runs a training, the worker is killed with SIGKILL, serve
replaces it, then serve is stopped, and no process it ever started is left. A worker process
that dies alone (killed, or ended by django-q2 at its timeout) takes its trainer with it.

Rows are committed, in a workspace of its own, on a pool only this test's worker serves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import psutil
import pytest
from django.conf import settings
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from tests.conftest import database_url_for_workers
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture
from tests.processes import free_port, start_worker, stop, wait_until
from tests.worker_pools import (
    pool_of_its_own,
    q_learning_spec,
    workspace_of_its_own,
)

pytestmark = pytest.mark.slow

# A training that outlasts the test: it must be stopped, never finish on its own.
LONG = q_learning_spec(episodes=50_000_000)


@pytest.fixture
def pool(committed_db):  # noqa: F811 - the fixture imported above
    with pool_of_its_own("tree", card_type="L4", position=72) as pool:
        yield pool


@pytest.fixture
def live_workspace(committed_db):  # noqa: F811
    with workspace_of_its_own("tree") as workspace:
        yield workspace


def _start_training(workspace, pool) -> int:
    with schema_context(workspace.schema_name):
        return job_start(kind="engines", trainer="q-learning-online", spec=LONG, pool=pool).pk


def _running_trainer(workspace, job_id: int) -> Job | None:
    with schema_context(workspace.schema_name):
        job = Job.objects.get(pk=job_id)
    return job if job.trainer_pid and job.progress_step > 0 else None


def _alive(process: psutil.Process) -> bool:
    """Still there: is_running also checks the start time, so a reused pid is not ours."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _tree(root: psutil.Process) -> set[psutil.Process]:
    """Every process below `root`, whatever session or group it put itself in."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return set(root.children(recursive=True))
    return set()


def _kill_all(processes: set[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if _alive(process):
                process.kill()


def _described(processes: list[psutil.Process]) -> str:
    lines = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            lines.append(f"  {process.pid}: {' '.join(process.cmdline())[:120]}")
    return "\n".join(lines)


def test_it_stops_every_process_after_the_worker_was_killed(pool, live_workspace, tmp_path):
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(free_port())],
            cwd=settings.BASE_DIR,
            env={
                **os.environ,
                "DATABASE_URL": database_url_for_workers(),
                "LEVERS9_Q_CLUSTER": pool.cluster_name,
                "LEVERS9_Q_WORKERS": "2",
                "PYTHONUNBUFFERED": "1",
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    seen: set[psutil.Process] = set()
    try:
        job_id = _start_training(live_workspace, pool)
        job = wait_until(
            lambda: _running_trainer(live_workspace, job_id),
            timeout=120,
            what=f"the training to run; serve said:\n{log_path.read_text()}",
        )
        serve_process = psutil.Process(serve.pid)
        seen |= _tree(serve_process)
        trainer = psutil.Process(job.trainer_pid)
        assert trainer in seen, "the trainer is not below serve"
        (cluster,) = [each for each in serve_process.children() if "qcluster" in each.cmdline()]
        # The cluster's main process dies hard; serve starts a new worker at once.
        cluster.kill()
        wait_until(
            lambda: "Started the worker (qcluster) again" in log_path.read_text(),
            timeout=60,
            what="serve to start a new worker",
        )
        seen |= _tree(serve_process)
        # Ctrl+C: serve stops what it runs, and what the killed worker had left.
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=120) == 0, log_path.read_text()
        left = [process for process in seen if _alive(process)]
        assert not left, (
            f"{len(left)} processes left after SIGKILL of the worker, then Ctrl+C:\n"
            f"{_described(left)}"
        )
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        _kill_all(seen)


def test_a_worker_process_that_dies_takes_its_silent_trainer_with_it(pool, live_workspace):
    """The process running the task is killed alone (as django-q2 ends a worker at its
    timeout): the sentinel replaces it, and its trainer, in a session of its own, stops too.

    The trainer is suspended first: one that says nothing for a while (loading a base, a long
    step, a long job paused for a short one) never writes to the dead worker's pipe, so a
    broken pipe never ends it. No dashboard runs: nobody else is there to stop it."""
    cluster = start_worker(cluster=pool.cluster_name, workers=1)
    trainer_tree: set[psutil.Process] = set()
    try:
        job_id = _start_training(live_workspace, pool)
        job = wait_until(
            lambda: _running_trainer(live_workspace, job_id),
            timeout=120,
            what="the training to run",
        )
        worker = psutil.Process(int(job.worker.rsplit(":", 1)[1]))
        trainer = psutil.Process(job.trainer_pid)
        trainer_tree = {trainer} | _tree(trainer)
        (training,) = [
            process
            for process in trainer_tree
            if process.cmdline()[1:3] == ["-m", "trainers.moves.q_learning"]
        ]
        training.suspend()
        worker.kill()
        wait_until(
            lambda: not any(_alive(process) for process in trainer_tree),
            timeout=30,
            what=f"the trainer to stop with its worker:\n{_described(list(trainer_tree))}",
        )
    finally:
        stop(cluster)
        _kill_all(trainer_tree)
