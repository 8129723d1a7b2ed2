"""Which process a job's worker or watcher is: the name both the runner (in the worker) and the
lifecycle services (in the dashboard) write on a job. Its own module so that neither of those
imports the other for it."""

from __future__ import annotations

import os
import socket


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
