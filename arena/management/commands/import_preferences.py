"""`manage.py import_preferences FILE --workspace <slug> --pack <slug>` — preference pairs in
TRL's preference format (JSONL), imported as picks."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.management.world_lookup import workspace_named, world_named
from arena.services import PreferenceImportError, preferences_import


class Command(BaseCommand):
    help = "Import preference pairs (TRL format, JSONL) as picks. All or nothing; idempotent by id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--pack", required=True, help="The world's slug")

    def handle(self, *args, file: Path, workspace: str, pack: str, **options) -> None:
        found = workspace_named(workspace)
        if not file.is_file():
            raise CommandError(f"No such file: {file}")
        with schema_context(found.schema_name):
            world = world_named(pack, workspace=workspace)
            started = time.perf_counter()
            try:
                report = preferences_import(world=world, text=file.read_bytes(), source=file.name)
            except PreferenceImportError as error:
                raise CommandError(str(error)) from error
            seconds = time.perf_counter() - started
        self.stdout.write(
            self.style.SUCCESS(
                f"{report.created} preference pairs imported as picks, "
                f"{report.unchanged} already there, in {seconds:.2f}s."
            )
        )
