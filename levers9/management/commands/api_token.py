"""`manage.py api_token <workspace> <user>` prints a token for integrations."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context
from rest_framework.authtoken.models import Token

from levers9.models import Workspace


class Command(BaseCommand):
    help = "Print the API token of a workspace user (created on first use)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("workspace", help="The workspace slug")
        parser.add_argument("user", help="The user's e-mail / username in that workspace")

    def handle(self, *args, workspace: str, user: str, **options) -> None:
        found = Workspace.objects.filter(slug=workspace).exclude(schema_name="public").first()
        if found is None:
            raise CommandError(f"No workspace '{workspace}'. List them in the public admin.")
        with schema_context(found.schema_name):
            account = get_user_model().objects.filter(username=user.strip().lower()).first()
            if account is None:
                raise CommandError(f"No user '{user}' in workspace '{workspace}'.")
            token, _created = Token.objects.get_or_create(user=account)
            self.stdout.write(token.key)
