"""`manage.py freeze_preferences --workspace <slug>` — freeze the picks into the next version."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.errors import DuelError
from arena.management.world_lookup import workspace_named
from arena.selectors import preference_version_path
from arena.services import preference_freeze


class Command(BaseCommand):
    help = (
        "Freeze every pick not frozen yet into the next numbered preference version: a TSV "
        "and a manifest on the datasets volume. Refuses when there is no new pick."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", required=True, help="The workspace slug")
        parser.add_argument("--by", default="", help="The e-mail of the user it is recorded as")

    def handle(self, *args, workspace: str, by: str, **options) -> None:
        found = workspace_named(workspace)
        with schema_context(found.schema_name):
            user = None
            if by:
                user = get_user_model().objects.filter(username=by.strip().lower()).first()
                if user is None:
                    raise CommandError(f"No user '{by}' in workspace '{workspace}'.")
            try:
                version = preference_freeze(by=user)
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
