"""`manage.py serve` — the web server (daphne: HTTP + websockets) and a task worker together.

Each runs as its own process, and each outlives the other: when the web process dies (a crash,
an OOM kill, `kill -9`), serve starts a new one and leaves the worker and the embedded database
alone, so a training carries on and the new web process's job watcher adopts it (levers9.jobs
.adoption.jobs_follow). A dead worker is started again the same way. Only Ctrl+C (or SIGTERM to
serve) stops everything: both processes, then the embedded database when we use it.

Nothing a process started outlives it: each runs as the leader of a process group of its own,
and when it ends — dead, replaced, or stopped — serve kills what is left in its group (a
killed worker's sentinel and workers) before starting the next one. The leader is reaped only
after that, so its group's id cannot have gone to another process meanwhile. What left the
group (a trainer, in a session of its own) dies with its parent (levers9.management.commands
.qcluster, levers9.jobs.trainer_guard).

`--no-web` runs the worker alone: a second worker machine for the same pools, on the first
machine's database and Redis (README, "Adding a worker machine").
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from levers9 import embedded_pg
from trainers.reading.base_server import servers_stop

# A process that dies sooner than this after its start is failing to start (a port in use, a
# broken setting): wait before each new try, doubling up to the cap, instead of spinning.
QUICK_DEATH_S = 10.0
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# How long each process may take to stop on SIGTERM before it is killed (a worker finishing
# its current step, daphne closing its sockets).
STOP_GRACE_S = 30


@dataclass
class _Kept:
    """One process serve keeps running: how to start it, and its current incarnation."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    backoff_s: float = 0.0
    restart_at: float | None = field(default=None)

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            self.argv,
            env=self.env,
            # Own sessions: the terminal's Ctrl+C reaches only serve, which stops them in order,
            # and a signal to one never reaches the other.
            start_new_session=True,
        )
        self.started_at = time.monotonic()
        self.restart_at = None

    def died(self) -> int | None:
        """The exit code when the process has ended since it was started (what it left in its
        group killed), else None."""
        if self.process is None or self.restart_at is not None:
            return None
        if self.process.returncode is None and not _has_exited(self.process.pid):
            return None
        return self.end_group()

    def end_group(self) -> int:
        """Kill whatever is left in the process's group, the process too, then reap it."""
        # Until it is reaped the leader is a zombie whose pid, the group's id, nobody else can
        # have: the group signalled is still ours.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait()

    def schedule_restart(self) -> float:
        """When to start it again: at once after a long life, later after a quick death."""
        if time.monotonic() - self.started_at < QUICK_DEATH_S:
            self.backoff_s = min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, self.backoff_s * 2))
        else:
            self.backoff_s = 0.0
        self.restart_at = time.monotonic() + self.backoff_s
        return self.backoff_s

    def running(self) -> bool:
        return (
            self.process is not None
            and self.process.returncode is None
            and not _has_exited(self.process.pid)
        )


def _has_exited(pid: int) -> bool:
    """Whether our child `pid` has ended, without reaping it (Popen.poll would)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class Command(BaseCommand):
    help = "Serve Levers9 Arena with a worker; Ctrl+C stops everything."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
        parser.add_argument("--no-worker", action="store_true")
        parser.add_argument(
            "--no-web",
            action="store_true",
            help="Run the worker alone: another machine serving the same pools.",
        )
        parser.add_argument(
            "--keep-database", action="store_true", help="Leave the embedded database running."
        )

    def handle(
        self,
        *args,
        host: str,
        port: int,
        no_worker: bool,
        no_web: bool,
        keep_database: bool,
        **options,
    ):
        if no_web and no_worker:
            raise CommandError("--no-web and --no-worker together leave nothing to serve.")
        if no_web and not os.environ.get("DATABASE_URL"):
            # A worker machine on an embedded database of its own would serve nobody's jobs.
            raise CommandError(
                "A worker machine (--no-web) serves the first machine's jobs: set DATABASE_URL "
                "(and REDIS_URL) to that machine's PostgreSQL (and Redis)."
            )
        python = sys.executable
        kept = []
        if not no_web:
            kept.append(
                _Kept(
                    name="web process (daphne)",
                    argv=[
                        python,
                        "-m",
                        "daphne",
                        "-b",
                        host,
                        "-p",
                        str(port),
                        "config.asgi:application",
                    ],
                    env={**os.environ, "LEVERS9_JOB_WATCHER": "1"},
                )
            )
        if not no_worker:
            kept.append(
                _Kept(
                    name="worker (qcluster)",
                    argv=[python, "manage.py", "qcluster"],
                    env={**os.environ},
                )
            )
        stopping = False

        def stop(*_args) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for each in kept:
            each.start()
            self.stdout.write(f"Started the {each.name}, pid {each.process.pid}.")
        serving = f"on http://{host}:{port}/" if not no_web else "this machine's worker"
        self.stdout.write(self.style.SUCCESS(f"Serving {serving} — press Ctrl+C to stop."))
        while not stopping:
            self._keep_running(kept)
            time.sleep(0.3)
        self._stop(kept)
        # The machine's scoring processes (one per base) go with what serve started.
        servers_stop(settings.MODELS_DIR)
        if not os.environ.get("DATABASE_URL") and not keep_database:
            embedded_pg.stop()
            self.stdout.write("Embedded database stopped.")
        self.stdout.write("Stopped.")

    def _keep_running(self, kept: list[_Kept]) -> None:
        now = time.monotonic()
        for each in kept:
            code = each.died()
            if code is not None:
                wait = each.schedule_restart()
                self.stderr.write(
                    f"The {each.name} (pid {each.process.pid}) exited with code {code}; "
                    f"starting it again in {wait:.0f} s. The others carry on."
                )
            if each.restart_at is not None and now >= each.restart_at:
                each.start()
                self.stdout.write(f"Started the {each.name} again, pid {each.process.pid}.")
            self.stdout.flush()

    def _stop(self, kept: list[_Kept]) -> None:
        self.stdout.write("Stopping ...")
        for each in kept:
            if each.running():
                # SIGTERM to each main process only: qcluster hangs when its group is signalled.
                each.process.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for each in kept:
            if each.process is None or each.process.returncode is not None:
                continue
            while each.running() and time.monotonic() < deadline:
                time.sleep(0.1)
            # Then whatever is left in its group goes, the process itself if it did not stop.
            each.end_group()
