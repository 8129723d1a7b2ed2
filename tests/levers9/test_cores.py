"""A trainer's threads are sized to the cores this process really has (its affinity, bounded by
its container's CPU quota, not the machine's count), divided among the pool's slots, one for a
job in a lane beside them, and they wait passively rather than spin on a shared core."""

from __future__ import annotations

import os

import pytest

from levers9.jobs import cores


@pytest.fixture
def two_cores(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(cores, "CGROUP_V2_MAX", tmp_path / "cpu.max")
    monkeypatch.setattr(cores, "CGROUP_V1_QUOTA", tmp_path / "cfs_quota_us")
    monkeypatch.setattr(cores, "CGROUP_V1_PERIOD", tmp_path / "cfs_period_us")
    return tmp_path


def test_the_affinity_and_the_container_quota_bound_the_cores(two_cores):
    assert cores.cores_available() == 2
    (two_cores / "cpu.max").write_text("max 100000\n")
    assert cores.cores_available() == 2
    (two_cores / "cpu.max").write_text("150000 100000\n")  # one and a half cores
    assert cores.cores_available() == 1
    (two_cores / "cpu.max").unlink()
    (two_cores / "cfs_quota_us").write_text("100000\n")
    (two_cores / "cfs_period_us").write_text("100000\n")
    assert cores.cores_available() == 1
    (two_cores / "cfs_quota_us").write_text("-1\n")
    assert cores.cores_available() == 2


def test_a_slots_job_shares_the_cores_and_a_lanes_job_gets_one(two_cores):
    assert cores.trainer_thread_env(lane_threads=None, slots=1) == {
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    assert cores.trainer_thread_env(lane_threads=None, slots=4)["OMP_NUM_THREADS"] == "1"
    assert cores.trainer_thread_env(lane_threads=1)["OMP_NUM_THREADS"] == "1"
