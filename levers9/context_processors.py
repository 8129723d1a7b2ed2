"""What every workspace page shows in its header: the workspace and the user's role (the world
and its badge: policies.context_processors)."""

from __future__ import annotations

from django.db import connection

from levers9.roles import user_role


def workspace(request) -> dict:
    tenant = getattr(request, "tenant", None)
    if tenant is None or connection.schema_name == "public":
        return {"workspace": None}
    return {"workspace": tenant, "role": user_role(request.user)}
