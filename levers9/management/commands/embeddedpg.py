"""`manage.py embeddedpg start|stop|status|url` — the embedded PostgreSQL server."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError

from levers9 import embedded_pg


class Command(BaseCommand):
    help = (
        "Start, stop or inspect the embedded PostgreSQL server (used when DATABASE_URL is unset)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status", "url"])

    def handle(self, *args, action: str, **options) -> None:
        if os.environ.get("DATABASE_URL"):
            self.stdout.write(
                "DATABASE_URL is set, so the embedded server is not used "
                "(unset it to use the embedded one)."
            )
            return
        try:
            if action == "start":
                was_running = embedded_pg.is_running()
                state = embedded_pg.start(say=self.stdout.write)
                verb = "already running" if was_running else "started"
                self.stdout.write(self.style.SUCCESS(f"Embedded PostgreSQL {verb} at {state.url}"))
            elif action == "stop":
                stopped = embedded_pg.stop()
                self.stdout.write("Stopped." if stopped else "It was not running.")
            elif action == "status":
                state = embedded_pg.read_state()
                if state and embedded_pg.is_running(state):
                    self.stdout.write(f"running on 127.0.0.1:{state.port}, data in {state.pgdata}")
                else:
                    self.stdout.write("stopped")
            else:
                state = embedded_pg.read_state()
                if state is None:
                    raise CommandError("No embedded server yet: run `manage.py embeddedpg start`.")
                self.stdout.write(state.url)
        except embedded_pg.EmbeddedPostgresError as error:
            raise CommandError(str(error)) from error
