"""A trainer's guard: the process a worker starts in its trainer's place, so that nothing the
trainer starts outlives the worker that reads it.

    python -m levers9.jobs.trainer_guard <worker pid> -- python -m trainers.<room>.<name> ...

A trainer runs in a session of its own (a signal to the worker's group must not reach it), so
when its worker dies — killed, ended by django-q2 at its timeout, or taken down with its
cluster — nothing would stop it: it would hold its cores or cards, with nobody to read its
result (the task dies with the worker, and the dashboard fails the job). The guard asks the
kernel for SIGTERM when the worker dies (PR_SET_PDEATHSIG), and to become the parent of every
orphan below it (PR_SET_CHILD_SUBREAPER): torchrun's ranks each start their own session and
would otherwise be lost to init when torchrun dies. On SIGTERM (from the kernel, or the
runner's cancel) it stops the whole tree: SIGTERM and SIGCONT (a suspended trainer must hear
it), then SIGKILL after a grace. When the trainer ends, whatever it left is killed, and the
guard ends as the trainer did, so the runner reads the same exit code.

Its stdout and stderr are the trainer's (inherited), so the runner's progress pipe is
unchanged. Plain Python and psutil only: it starts in milliseconds, before the trainer.
Dashboards are not involved: a trainer outlives a dashboard restart (levers9.jobs.adoption).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

# Imported here, never first in a signal handler: a second signal during that import (the
# kernel may send the parent-death signal more than once, as the worker's threads end) would
# find the module half made.
import psutil

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# How long the trainer's tree has to stop on SIGTERM before it is killed: shorter than the
# runner's own wait (levers9.jobs.runner._stop), so the guard is the one that finishes it.
STOP_GRACE_S = 5


def _prctl(option: int, value: int) -> bool:
    """True where the kernel took it (Linux); elsewhere the guard still runs, unguarded."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `signum` to this process when the thread that started it exits.
    False where that cannot be asked (not Linux)."""
    return _prctl(PR_SET_PDEATHSIG, signum)


def guarded(command: list[str], *, worker_pid: int) -> list[str]:
    """`command` run under a guard that stops its whole tree when `worker_pid` dies."""
    return [sys.executable, "-m", "levers9.jobs.trainer_guard", str(worker_pid), "--", *command]


def _descendants() -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process().children(recursive=True)
    return []


def _signal_tree(signum: int) -> None:
    for process in _descendants():
        with contextlib.suppress(Exception):  # it ended meanwhile, or it is not ours to signal
            process.send_signal(signum)


_stopping = False


def _on_sigterm(_signum, _frame) -> None:
    """Once: a second SIGTERM (the kernel may repeat the parent-death signal) changes nothing."""
    global _stopping
    if not _stopping:
        _stopping = True
        _stop_tree()


def _stop_tree() -> None:
    """Stop everything below, and kill it if it has not stopped after the grace."""
    _signal_tree(signal.SIGTERM)
    _signal_tree(signal.SIGCONT)
    signal.signal(signal.SIGALRM, lambda *_: _signal_tree(signal.SIGKILL))
    signal.alarm(STOP_GRACE_S)


def _reap_all() -> None:
    """Kill what the trainer left and wait for every child, adopted orphans included."""
    _signal_tree(signal.SIGKILL)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def main(argv: list[str]) -> int:
    worker_pid, separator, *command = argv
    if separator != "--" or not command:
        sys.stderr.write("usage: python -m levers9.jobs.trainer_guard <worker pid> -- command\n")
        return 2
    die_with_parent(signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != int(worker_pid):
        return 1  # the worker died before the kernel could be asked: start nothing
    signal.signal(signal.SIGTERM, _on_sigterm)
    trainer = os.posix_spawn(command[0], command, os.environ)
    if _stopping:  # told to stop while it was being started: tell the trainer too
        _stop_tree()
    while True:
        pid, status = os.wait()  # the trainer, or an orphan adopted from below it
        if pid == trainer:
            break
    _reap_all()
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # end the way the trainer ended: the runner reads the same code
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
