"""The dashboard's second line against a trainer left by a dead worker: it signals a trainer
only on the worker's own machine, only once that worker is gone, and only while the pid still
runs the job's spec (a pid is only meaningful on its own host, and numbers are reused)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from levers9.jobs.processes import orphan_trainer_stop, pid_alive

SLEEPER = "import time; time.sleep(120)"


@pytest.fixture
def dead_worker_pid() -> int:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


@pytest.fixture
def trainer(tmp_path):
    """A stand-in trainer leading its own group, its spec's path on its command line."""
    spec_path = str(tmp_path / "spec.json")
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, "--spec", spec_path], start_new_session=True
    )
    yield process, spec_path
    process.kill()
    process.wait()


@pytest.fixture
def on_host(monkeypatch):
    monkeypatch.setenv("LEVERS9_HOST_NAME", "host-a")


def test_it_stops_the_trainer_of_a_dead_worker_on_this_host(on_host, trainer, dead_worker_pid):
    process, spec_path = trainer
    stopped = orphan_trainer_stop(
        worker=f"host-a:{dead_worker_pid}", trainer_pid=process.pid, spec_path=spec_path
    )
    assert stopped
    assert process.wait(timeout=10) == -15


def test_it_leaves_a_trainer_on_another_host_alone(on_host, trainer, dead_worker_pid):
    process, spec_path = trainer
    assert not orphan_trainer_stop(
        worker=f"host-b:{dead_worker_pid}", trainer_pid=process.pid, spec_path=spec_path
    )
    assert pid_alive(process.pid)


def test_it_leaves_the_trainer_of_a_live_worker_to_its_worker(on_host, trainer):
    process, spec_path = trainer
    live_worker = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        assert not orphan_trainer_stop(
            worker=f"host-a:{live_worker.pid}", trainer_pid=process.pid, spec_path=spec_path
        )
    finally:
        live_worker.kill()
        live_worker.wait()
    assert pid_alive(process.pid)


def test_it_leaves_a_process_that_took_the_trainers_number_alone(
    on_host, trainer, dead_worker_pid, tmp_path
):
    process, _ = trainer
    assert not orphan_trainer_stop(
        worker=f"host-a:{dead_worker_pid}",
        trainer_pid=process.pid,
        spec_path=str(tmp_path / "another-job" / "spec.json"),
    )
    assert pid_alive(process.pid)
