"""The benches timed on ONE core: BLAS kept to one thread, the process pinned to one CPU.

Import it before anything that loads numpy (in a bench, first among the project's imports):
OpenBLAS reads its thread count once, when numpy loads.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


def pin_to_one_core() -> str:
    """Pin this process to the lowest CPU it may use; says which, or why it could not."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity here)"
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return f"pinned to CPU {core}"
