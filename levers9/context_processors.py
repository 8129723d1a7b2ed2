"""What every workspace page shows in its header: workspace, role, world and its badge."""

from __future__ import annotations

from django.db import connection

from levers9.roles import user_role


def workspace(request) -> dict:
    tenant = getattr(request, "tenant", None)
    if tenant is None or connection.schema_name == "public":
        return {"workspace": None}
    context = {"workspace": tenant, "role": user_role(request.user)}
    if request.user.is_authenticated:
        from levers9.selectors import world_badge_for

        context.update(world_badge_for(request))
    return context
