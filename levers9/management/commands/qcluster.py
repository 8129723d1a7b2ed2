"""`manage.py qcluster` — django-q2's worker cluster, whose processes die with their parent.

django-q2's cluster is a tree: this process, its sentinel, and the sentinel's workers, pusher
and monitor. When this process is killed (`kill -9`, an OOM kill) the rest carried on without
it — about 900 MB and 7 database connections — and `manage.py serve` started a new cluster
beside them. Here every process the cluster forks asks the kernel to kill it when the process
that forked it dies (PR_SET_PDEATHSIG): the sentinel dies with this one, the workers with the
sentinel, and a worker's trainer with its worker (levers9.jobs.trainer_guard). django-q2's own
command otherwise: this app comes before django_q in INSTALLED_APPS, so this one is found.
"""

from __future__ import annotations

import os
import signal

from django_q.management.commands.qcluster import Command as DjangoQClusterCommand

from levers9.jobs.trainer_guard import die_with_parent

_forking_pid = 0


def _note_the_parent() -> None:
    global _forking_pid
    _forking_pid = os.getpid()


def _die_with_the_parent() -> None:
    """In each forked child (the handler is inherited, so the sentinel's children too)."""
    if die_with_parent(signal.SIGKILL) and os.getppid() != _forking_pid:
        os._exit(1)  # the parent died before the kernel was asked: nobody would stop this one


class Command(DjangoQClusterCommand):
    help = "Starts the worker cluster; its processes die with the process that started them."

    def handle(self, *args, **options):
        os.register_at_fork(before=_note_the_parent, after_in_child=_die_with_the_parent)
        return super().handle(*args, **options)
