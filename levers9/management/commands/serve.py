"""`manage.py serve` — the web server (daphne: HTTP + websockets) and a task worker together.

Ctrl+C (or SIGTERM) stops both cleanly, then the embedded database when we use it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

from levers9 import embedded_pg


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
        children: list[subprocess.Popen] = [
            subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                [python, "-m", "daphne", "-b", host, "-p", str(port), "levers9.asgi:application"],
                env={**os.environ, "LEVERS9_JOB_WATCHER": "1"},
                # Own sessions: the terminal's Ctrl+C reaches only us, and we stop them in order.
                start_new_session=True,
            )
        ]
        if not no_worker:
            children.append(
                subprocess.Popen(  # noqa: S603
                    [python, "manage.py", "qcluster"], start_new_session=True
                )
            )
        self.stdout.write(
            self.style.SUCCESS(f"Serving on http://{host}:{port}/ — press Ctrl+C to stop.")
        )
        stopping = False

        def stop(*_args) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.3)
        self.stdout.write("Stopping ...")
        for child in children:
            if child.poll() is None:
                # SIGTERM to each main process only: qcluster hangs when its group is signalled.
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
        if not os.environ.get("DATABASE_URL") and not keep_database:
            embedded_pg.stop()
            self.stdout.write("Embedded database stopped.")
        self.stdout.write("Stopped.")
