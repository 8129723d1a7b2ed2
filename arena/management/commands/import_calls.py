"""`manage.py import_calls FILE --workspace <slug> --pack <slug>` — real recorded calls."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.management.world_lookup import workspace_named, world_named
from arena.services import CallImportError, calls_import
from arena.services.calls import CONVERT_TO_REAL_CALLS


class Command(BaseCommand):
    help = "Import real calls (JSON or JSONL) into a world. All or nothing; idempotent by id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--pack", required=True, help="The world's slug")
        parser.add_argument(
            "--convert",
            choices=[CONVERT_TO_REAL_CALLS],
            help="Turn a simulated world with no recorded call into a real-call world on "
            "purpose (without it, such a world refuses calls).",
        )

    def handle(
        self, *args, file: Path, workspace: str, pack: str, convert: str | None = None, **options
    ) -> None:
        found = workspace_named(workspace)
        if not file.is_file():
            raise CommandError(f"No such file: {file}")
        with schema_context(found.schema_name):
            world = world_named(pack, workspace=workspace)
            started = time.perf_counter()
            try:
                report = calls_import(
                    world=world,
                    text=file.read_bytes(),
                    source=file.name,
                    convert=convert == CONVERT_TO_REAL_CALLS,
                )
            except CallImportError as error:
                raise CommandError(str(error)) from error
            seconds = time.perf_counter() - started
        self.stdout.write(
            self.style.SUCCESS(
                f"{report.created} calls imported ({report.turns_created} turns), "
                f"{report.unchanged} already there, in {seconds:.2f}s."
            )
        )
