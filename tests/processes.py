"""Real processes for tests: a web server (daphne, with the job watcher) and task workers,
running on this test run's database with committed rows.

Tests that use them must not hold a test transaction (they use `committed_db`), and clean
up what they create.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from django.conf import settings

from tests.conftest import database_url_for_workers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition: Callable[[], object], *, timeout: float, what: str, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _environment(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url_for_workers(), **extra}


def start_worker(*, cluster: str = "local-cpu", workers: int = 1) -> subprocess.Popen:
    """A real django-q2 cluster serving one pool's queue."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=settings.BASE_DIR,
        env=_environment({"LEVERS9_Q_CLUSTER": cluster, "LEVERS9_Q_WORKERS": str(workers)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def start_daphne(port: int, *, env: dict[str, str], output=subprocess.DEVNULL) -> subprocess.Popen:
    """daphne serving the app on 127.0.0.1:`port`, its stdout and stderr both to `output`, in a
    session of its own so that `stop` can kill its whole group."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_web(port: int) -> subprocess.Popen:
    """daphne serving the app, with the dashboard's job watcher, as `manage.py serve` runs it."""
    process = start_daphne(port, env=_environment({"LEVERS9_JOB_WATCHER": "1"}))

    def answers() -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_until(answers, timeout=60, what="the web server to answer")
    return process


def stop(process: subprocess.Popen, *, hard: bool = False) -> None:
    """SIGTERM to the main process (qcluster hangs if its group is signalled); SIGKILL all if
    asked or if it does not stop."""
    if process.poll() is not None:
        return
    if hard:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
