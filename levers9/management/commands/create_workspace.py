"""`manage.py create_workspace <slug> --admin-email ... --password ...`"""

from __future__ import annotations

import os

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from levers9.services import workspace_create


class Command(BaseCommand):
    help = (
        "Create a workspace: its schema, its domain (<slug>.localhost), an owner login, the "
        "default lettings world and v1 · baseline. Safe to run again."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--admin-email", default="")
        parser.add_argument(
            "--password",
            default=os.environ.get("LEVERS9_ADMIN_PASSWORD", ""),
            help="The owner's password (or set LEVERS9_ADMIN_PASSWORD).",
        )
        parser.add_argument("--name", default="")
        parser.add_argument("--domain", default="", help="Host name (default <slug>.localhost)")

    def handle(self, *args, slug: str, admin_email: str, password: str, **options) -> None:
        try:
            result = workspace_create(
                slug=slug,
                admin_email=admin_email,
                password=password,
                name=options["name"],
                domain=options["domain"],
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        if result.created:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Workspace '{slug}' created in {result.seconds:.2f}s at "
                    f"http://{result.domain}:8000/ (owner {admin_email})"
                )
            )
        else:
            self.stdout.write(f"Workspace '{slug}' already exists at http://{result.domain}:8000/")
