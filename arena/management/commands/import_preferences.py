"""`manage.py import_preferences FILE --workspace <slug> --pack <slug>` — preference pairs in
TRL's preference format (JSONL), imported as picks."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from arena.management.world_lookup import import_file
from arena.services import PreferenceImportError, preferences_import


class Command(BaseCommand):
    help = "Import preference pairs (TRL format, JSONL) as picks. All or nothing; idempotent by id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--pack", required=True, help="The world's slug")

    def handle(self, *args, file: Path, workspace: str, pack: str, **options) -> None:
        import_file(
            self,
            file=file,
            workspace=workspace,
            pack=pack,
            service=preferences_import,
            error_class=PreferenceImportError,
            done=lambda report, seconds: (
                f"{report.created} preference pairs imported as picks, "
                f"{report.unchanged} already there, in {seconds:.2f}s."
            ),
        )
