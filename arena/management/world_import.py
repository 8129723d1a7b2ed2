"""The commands that import one file into one world: the file, the workspace and the world
named on the command line, the import timed, and its refusal said as a command error."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.management.world_lookup import workspace_named, world_named


class WorldFileImportCommand(BaseCommand):
    """`manage.py <command> FILE --workspace <slug> --pack <slug>`; a subclass says how the
    file's bytes are imported, which error refuses them, and how its report reads."""

    refusal: type[Exception]

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
                report = self.import_into(
                    world, text=file.read_bytes(), source=file.name, **options
                )
            except self.refusal as error:
                raise CommandError(str(error)) from error
            seconds = time.perf_counter() - started
        self.stdout.write(self.style.SUCCESS(self.summary(report, seconds=seconds)))

    def import_into(self, world, *, text: bytes, source: str, **options):
        raise NotImplementedError

    def summary(self, report, *, seconds: float) -> str:
        raise NotImplementedError
