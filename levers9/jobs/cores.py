"""How many cores a trainer may use, and the thread settings its process starts with.

The cores are those this process may really run on: its CPU affinity, bounded by the CPU quota
of its container (cgroup v2 `cpu.max`, or v1's `cfs_quota_us`), not the machine's count, which a
container does not shrink. A job holding one of a CPU pool's slots gets the cores divided among
the slots; a job in a lane beside them (short or background work, levers9.pools) gets one.

OpenMP's threads wait passively: with the default policy a thread that has no work spins on
its core for a while, and beside another job's threads those spins take the cores the work
needs (a judge fit on two threads beside other work took 897 s, where alone on one thread it
took 191 s). bench.judge_fit_cost measures both policies beside another job and alone.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def _quota() -> float | None:
    """The container's CPU quota in cores (None: no quota, or none readable)."""
    try:
        if CGROUP_V2_MAX.exists():
            limit, period = CGROUP_V2_MAX.read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(period)
        if CGROUP_V1_QUOTA.exists():
            limit = int(CGROUP_V1_QUOTA.read_text())
            return None if limit <= 0 else limit / int(CGROUP_V1_PERIOD.read_text())
    except (OSError, ValueError):
        return None
    return None


def cores_available() -> int:
    """The cores this process may run on (at least one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota = _quota()
    if quota is not None:
        cores = min(cores, math.floor(quota))
    return max(1, cores)


def trainer_thread_env(*, lane_threads: int | None, slots: int = 1) -> dict[str, str]:
    """The environment a trainer's threads are sized by: `lane_threads` for a job in a lane
    beside the pool's slots, else the available cores divided among the `slots`."""
    threads = lane_threads if lane_threads is not None else cores_available() // max(1, slots)
    threads = str(max(1, threads))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OMP_WAIT_POLICY": "PASSIVE"}
