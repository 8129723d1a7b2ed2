"""Which process a job's worker or watcher is, and whether it is still alive: the name both the
runner (in the worker) and the lifecycle services (in the dashboard) write on a job. Its own
module so that neither of those imports the other for it."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.utils import timezone


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_alive(process_id: str, seen_at, timeout: timedelta) -> bool:
    """A "host:pid" we can ask directly on this host; elsewhere we go by its last sign of life."""
    host, _, pid = process_id.partition(":")
    if not process_id:
        return False
    if host == socket.gethostname():
        return pid_alive(int(pid.split(":")[0] or 0))
    return seen_at is not None and timezone.now() - seen_at < timeout
