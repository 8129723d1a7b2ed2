"""The refusal a workspace's job limits give (levers9.jobs.limits raises it) and when to ask
again; the API's exception handler (levers9.api) answers it with a 429. It sits in levers9
itself, below both, so the API names it without importing the job platform.
"""

from __future__ import annotations

# The refusal's Retry-After: a waiting job starts when another ends, which is minutes on a CPU
# pool; asking again every minute costs nothing and is soon enough.
JOB_LIMIT_RETRY_AFTER_S = 60


class JobLimitReached(Exception):
    """Starting a job would take the workspace over one of its limits; the message says which
    and how to raise it."""

    def __init__(self, message: str, *, limit: str, value: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
