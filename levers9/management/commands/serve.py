"""`manage.py serve` — the web server (daphne: HTTP + websockets) and a task worker together.

Each runs as its own process, and each outlives the other: when the web process dies (a crash,
an OOM kill, `kill -9`), serve starts a new one and leaves the worker and the embedded database
alone, so a training carries on and the new web process's job watcher adopts it (levers9.jobs
.adoption.jobs_follow). A dead worker is started again the same way. Only Ctrl+C (or SIGTERM to
serve) stops everything: both processes, then the embedded database when we use it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.core.management.base import BaseCommand

from levers9 import embedded_pg

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
        """The exit code when the process has ended since it was started, else None."""
        if self.process is None or self.restart_at is not None:
            return None
        return self.process.poll()

    def schedule_restart(self) -> float:
        """When to start it again: at once after a long life, later after a quick death."""
        if time.monotonic() - self.started_at < QUICK_DEATH_S:
            self.backoff_s = min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, self.backoff_s * 2))
        else:
            self.backoff_s = 0.0
        self.restart_at = time.monotonic() + self.backoff_s
        return self.backoff_s

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Command(BaseCommand):
    help = "Serve Levers9 Arena with a worker; Ctrl+C stops everything."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
        parser.add_argument("--no-worker", action="store_true")
        parser.add_argument(
            "--keep-database", action="store_true", help="Leave the embedded database running."
        )

    def handle(self, *args, host: str, port: int, no_worker: bool, keep_database: bool, **options):
        python = sys.executable
        kept = [
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
        ]
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
        self.stdout.write(
            self.style.SUCCESS(f"Serving on http://{host}:{port}/ — press Ctrl+C to stop.")
        )
        while not stopping:
            self._keep_running(kept)
            time.sleep(0.3)
        self._stop(kept)
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
        for each in kept:
            if each.process is None:
                continue
            try:
                each.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                each.process.kill()
                each.process.wait()
