"""Which process a job's worker or watcher is, and whether it is still alive: the name both the
runner (in the worker) and the lifecycle services (in the dashboard) write on a job. Its own
module so that neither of those imports the other for it.

A pid means something only on its own machine, so every process is named "host:pid" and only
a process on this host is asked or signalled directly; one on another host is judged by its
last sign of life (a worker's heartbeat, a watcher's last look). Several worker machines serve
one pool (README, "Adding a worker machine"): each must have a name of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from datetime import timedelta

from django.utils import timezone


def this_host() -> str:
    """This machine's name on the job records: LEVERS9_HOST_NAME, else its hostname.

    Read from the environment on each call (not a setting): the tests run two "machines" on
    one by giving each group of processes its own name. Two real machines whose hostnames
    clash (cloned images) set it too.
    """
    return os.environ.get("LEVERS9_HOST_NAME", "").strip() or socket.gethostname()


def this_process() -> str:
    return f"{this_host()}:{os.getpid()}"


def _host_and_pid(process_id: str) -> tuple[str, int]:
    host, _, pid = process_id.rpartition(":")
    return host, int(pid) if pid.isdigit() else 0


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
    if not process_id:
        return False
    host, pid = _host_and_pid(process_id)
    if host == this_host():
        return pid_alive(pid)
    return seen_at is not None and timezone.now() - seen_at < timeout


def _runs_spec(pid: int, spec_path: str) -> bool:
    """Whether `pid` is still a trainer of this spec (its guard, or the trainer itself), not a
    process that took the number after it ended."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return bool(spec_path) and spec_path.encode() in cmdline.read().split(b"\0")
    except OSError:
        return False


def orphan_trainer_stop(*, worker: str, trainer_pid: int | None, spec_path: str) -> bool:
    """Stop a job's trainer whose worker died on this host; True when one was told to stop.

    A trainer's guard stops it when its worker dies (levers9.jobs.trainer_guard): this is the
    dashboard's second line, for a trainer left by a worker that died before its guard could
    ask the kernel. Only on the worker's own host (a pid elsewhere is another process), only
    when that worker is gone (else the runner stops its own trainer on cancel), and only when
    the pid still runs this job's spec.
    """
    host, worker_pid = _host_and_pid(worker)
    if not trainer_pid or host != this_host() or pid_alive(worker_pid):
        return False
    if not _runs_spec(trainer_pid, spec_path):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        # Its guard leads the group: SIGTERM lets it stop the whole tree (torchrun's ranks
        # too), SIGCONT wakes a suspended one to hear it.
        os.killpg(trainer_pid, signal.SIGTERM)
        os.killpg(trainer_pid, signal.SIGCONT)
        return True
    return False
