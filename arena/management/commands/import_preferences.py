"""`manage.py import_preferences FILE --workspace <slug> --pack <slug>` — preference pairs in
TRL's preference format (JSONL), imported as picks."""

from __future__ import annotations

from arena.management.world_import import WorldFileImportCommand
from arena.services.preferences import PreferenceImportError, preferences_import


class Command(WorldFileImportCommand):
    help = "Import preference pairs (TRL format, JSONL) as picks. All or nothing; idempotent by id."
    refusal = PreferenceImportError

    def import_into(self, world, *, text: bytes, source: str, **_):
        return preferences_import(world=world, text=text, source=source)

    def summary(self, report, *, seconds: float) -> str:
        return (
            f"{report.created} preference pairs imported as picks, "
            f"{report.unchanged} already there, in {seconds:.2f}s."
        )
