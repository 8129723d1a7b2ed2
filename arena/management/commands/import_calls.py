"""`manage.py import_calls FILE --workspace <slug> --pack <slug>` — real recorded calls."""

from __future__ import annotations

from arena.management.world_import import WorldFileImportCommand
from arena.services.calls import CONVERT_TO_REAL_CALLS, CallImportError, calls_import


class Command(WorldFileImportCommand):
    help = "Import real calls (JSON or JSONL) into a world. All or nothing; idempotent by id."
    refusal = CallImportError

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--convert",
            choices=[CONVERT_TO_REAL_CALLS],
            help="Turn a simulated world with no recorded call into a real-call world on "
            "purpose (without it, such a world refuses calls).",
        )

    def import_into(self, world, *, text: bytes, source: str, convert: str | None = None, **_):
        return calls_import(
            world=world, text=text, source=source, convert=convert == CONVERT_TO_REAL_CALLS
        )

    def summary(self, report, *, seconds: float) -> str:
        return (
            f"{report.created} calls imported ({report.turns_created} turns), "
            f"{report.unchanged} already there, in {seconds:.2f}s."
        )
