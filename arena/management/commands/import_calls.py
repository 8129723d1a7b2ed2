"""`manage.py import_calls FILE --workspace <slug> --pack <slug>` — real recorded calls."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from arena.management.world_lookup import import_file
from arena.services import CallImportError, calls_import


class Command(BaseCommand):
    help = "Import real calls (JSON or JSONL) into a world. All or nothing; idempotent by id."

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
            service=calls_import,
            error_class=CallImportError,
            done=lambda report, seconds: (
                f"{report.created} calls imported ({report.turns_created} turns), "
                f"{report.unchanged} already there, in {seconds:.2f}s."
            ),
        )
