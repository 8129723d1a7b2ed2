"""Which workspace a model call is made for, as levers9.providers needs it to scope key
variables (LEVERS9_ENDPOINT_<SLUG>_<NAME>_KEY is readable in workspace <slug> only).

Registered with levers9.providers by levers9.apps. Reads the public schema (the workspaces)
and the connection's schema: the workspace in view, in a request, a task or a job's thread.
"""

from __future__ import annotations

from django.db import connection
from django_tenants.utils import get_public_schema_name


def workspace_in_view_and_all() -> tuple[str, list[str]]:
    """(the slug of the workspace in view, "" outside one; the slugs of every workspace)."""
    from levers9.models import Workspace

    public = get_public_schema_name()
    rows = list(Workspace.objects.exclude(schema_name=public).values_list("schema_name", "slug"))
    in_view = next((slug for schema, slug in rows if schema == connection.schema_name), "")
    return in_view, [slug for _schema, slug in rows]
