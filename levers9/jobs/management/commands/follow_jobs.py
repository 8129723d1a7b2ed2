"""`manage.py follow_jobs [--once]` — the dashboard's job watcher without the web server."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from levers9.jobs.processes import this_process
from levers9.jobs.watcher import follow_all_workspaces, watch_forever


class Command(BaseCommand):
    help = "Follow every workspace's jobs: adopt interrupted ones, finish ended ones."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="Look once and exit.")

    def handle(self, *args, once: bool, **options) -> None:
        if once:
            finished = follow_all_workspaces(watcher=this_process())
            self.stdout.write(f"{finished} job(s) finished.")
            return
        watch_forever()
