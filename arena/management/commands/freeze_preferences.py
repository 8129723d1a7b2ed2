"""`manage.py freeze_preferences --workspace <slug> --pack <world>` — freeze a world's picks into
its next version."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.errors import DuelError
from arena.management.world_lookup import workspace_named, world_named
from arena.selectors import preference_version_path
from arena.services.freeze import preference_freeze


class Command(BaseCommand):
    help = (
        "Freeze a world's picks not frozen yet into its next numbered preference version: a "
        "TSV and a manifest on the datasets volume. Refuses when the world has no new pick."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", required=True, help="The workspace slug")
        parser.add_argument("--pack", required=True, help="The world (its slug) to freeze")
        parser.add_argument("--by", default="", help="The e-mail of the user it is recorded as")

    def handle(self, *args, workspace: str, pack: str, by: str, **options) -> None:
        found = workspace_named(workspace)
        with schema_context(found.schema_name):
            world = world_named(pack, workspace=workspace)
            user = None
            if by:
                user = get_user_model().objects.filter(username=by.strip().lower()).first()
                if user is None:
                    raise CommandError(f"No user '{by}' in workspace '{workspace}'.")
            try:
                version = preference_freeze(world=world, by=user)
            except DuelError as error:
                raise CommandError(str(error)) from error
            path = preference_version_path(version)
            on = f" on v{version.extends.number}" if version.extends else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Froze {version.label}: {version.row_count} picks "
                f"({version.picks_added} new{on})\n  {path}\n  sha256 {version.sha256}"
            )
        )
