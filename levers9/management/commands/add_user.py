"""`manage.py add_user <workspace> <email> --role reviewer|manager|owner --password ...`"""

from __future__ import annotations

import os

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from levers9.models import Workspace
from levers9.roles import ROLES
from levers9.services import workspace_user_create


class Command(BaseCommand):
    help = "Add a user with one role to a workspace."

    def add_arguments(self, parser) -> None:
        parser.add_argument("workspace")
        parser.add_argument("email")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--password", default=os.environ.get("LEVERS9_USER_PASSWORD", ""))

    def handle(self, *args, workspace: str, email: str, role: str, password: str, **options):
        found = Workspace.objects.filter(slug=workspace).exclude(schema_name="public").first()
        if found is None:
            raise CommandError(f"No workspace '{workspace}'.")
        with schema_context(found.schema_name):
            try:
                workspace_user_create(email=email, password=password, role=role)
            except ValidationError as error:
                raise CommandError(" ".join(error.messages)) from error
        self.stdout.write(self.style.SUCCESS(f"{email} is a {role} in '{workspace}'."))
