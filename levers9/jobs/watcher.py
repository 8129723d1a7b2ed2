"""The dashboard's job watcher: a thread in the web process that follows every workspace's jobs.

It is what a dashboard restart interrupts: while it is gone, trainings carry on headless on
the workers; when the web process starts again, its new watcher adopts them (marking them
interrupted first) and finishes them exactly as it would have.
"""

from __future__ import annotations

import logging
import threading

from django.db import close_old_connections
from django_tenants.utils import get_public_schema_name, schema_context

from levers9.jobs.processes import this_process

logger = logging.getLogger(__name__)
_started: threading.Thread | None = None


def follow_all_workspaces(*, watcher: str) -> int:
    """One look at every workspace's jobs; returns how many were finished."""
    from levers9.jobs.adoption import jobs_follow
    from levers9.models import Workspace

    finished = 0
    for schema_name in Workspace.objects.exclude(schema_name=get_public_schema_name()).values_list(
        "schema_name", flat=True
    ):
        with schema_context(schema_name):
            finished += len(jobs_follow(watcher=watcher))
    return finished


def watch_forever(*, interval: float = 1.0, stop: threading.Event | None = None) -> None:
    watcher = this_process()
    stop = stop or threading.Event()
    logger.info("Job watcher %s following every workspace's jobs", watcher)
    while not stop.is_set():
        try:
            follow_all_workspaces(watcher=watcher)
        except Exception:  # keep following: one bad row must not blind the dashboard
            logger.exception("The job watcher's look failed; trying again")
        finally:
            close_old_connections()
        stop.wait(interval)


def start_in_background() -> threading.Thread:
    """Start the watcher once per process (the ASGI app calls this when asked to)."""
    global _started
    if _started is None or not _started.is_alive():
        _started = threading.Thread(target=watch_forever, name="job-watcher", daemon=True)
        _started.start()
    return _started
