"""`manage.py sweep_features [--workspace <slug>] [--max-mb N]` — keep each workspace's cache of
the base's reads within its budget, the least used first (arena.judge.judge_base.features_sweep)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.judge.judge_base import features_dir, features_sweep
from arena.management.world_lookup import workspace_named
from levers9.models import Workspace


class Command(BaseCommand):
    help = (
        "Remove the least used of what the judge's base has read from each workspace's cache "
        "until it fits its budget (LEVERS9_JUDGE_FEATURES_MAX_MB, or --max-mb). A removed read "
        "is read again when next needed. Each judge fit does this too; run it from cron to "
        "bound the datasets volume between fits."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", default="", help="One workspace's slug (default all)")
        parser.add_argument(
            "--max-mb", type=float, default=None, help="The budget per workspace, in MB"
        )

    def handle(self, *args, workspace: str, max_mb: float | None, **options) -> None:
        if max_mb is not None and max_mb < 0:
            raise CommandError("--max-mb must be 0 or more (0 empties the cache).")
        budget = None if max_mb is None else int(max_mb * 1024 * 1024)
        workspaces = (
            [workspace_named(workspace)]
            if workspace
            else Workspace.objects.exclude(schema_name="public").order_by("slug")
        )
        for each in workspaces:
            with schema_context(each.schema_name):
                swept = features_sweep(budget)
                folder = features_dir()
            self.stdout.write(
                f"{each.slug}: removed {swept.removed} ({swept.freed_bytes / 2**20:.1f} MB), "
                f"kept {swept.kept} ({swept.kept_bytes / 2**20:.1f} MB) in {folder}"
            )
