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
    """The public host's front page. Which workspaces exist is the operators' to know: the list
    is shown to a signed-in platform operator only, never to an anonymous visitor."""
    operator = request.user.is_authenticated and request.user.is_staff
    workspaces = (
        Workspace.objects.exclude(schema_name="public").prefetch_related("domains")
        if operator
        else Workspace.objects.none()
    )
    return render(request, "public_index.html", {"workspaces": workspaces, "operator": operator})
