"""Pages of the platform: the workspace home (the four missions) and the public index."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from levers9.models import Workspace


@login_required
def home(request):
    from levers9.game import home_context

    # The missions and the rest of the page are the apps' (levers9.game).
    return render(request, "home.html", home_context())


def public_index(request):
    workspaces = Workspace.objects.exclude(schema_name="public").prefetch_related("domains")
    return render(request, "public_index.html", {"workspaces": workspaces})
