"""`manage.py import_calls FILE --workspace <slug> --pack <slug>` — real recorded calls."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.models import World
from arena.services import CallImportError, calls_import
from levers9.models import Workspace


class Command(BaseCommand):
    help = "Import real calls (JSON or JSONL) into a world. All or nothing; idempotent by id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--pack", required=True, help="The world's slug")

    def handle(self, *args, file: Path, workspace: str, pack: str, **options) -> None:
        found = Workspace.objects.filter(slug=workspace).exclude(schema_name="public").first()
        if found is None:
            raise CommandError(f"No workspace '{workspace}'.")
        if not file.is_file():
            raise CommandError(f"No such file: {file}")
        with schema_context(found.schema_name):
            world = World.objects.filter(slug=pack).first()
            if world is None:
                known = ", ".join(World.objects.values_list("slug", flat=True))
                raise CommandError(f"No world '{pack}' in '{workspace}' (worlds: {known}).")
            started = time.perf_counter()
            try:
                report = calls_import(
                    world=world, text=file.read_text(encoding="utf-8"), source=file.name
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
