"""Pages of the platform: the workspace home (the four missions) and the public index."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from levers9.models import Workspace


@login_required
def home(request):
    from arena.selectors import world_list_with_counts
    from policies.models import PolicyVersion

    missions = [
        {
            "number": 3,
            "title": "Duel",
            "url": "duel",
            "what": "Compare two replies at one moment of a call and pick the better one.",
            "role": "reviewer",
        },
        {
            "number": 4,
            "title": "Level up",
            "url": "train",
            "what": "Train the next numbered version of the agent.",
            "role": "manager",
        },
        {
            "number": 5,
            "title": "Boss fight",
            "url": "evaluate",
            "what": "Evaluate two versions on the same calls.",
            "role": "manager",
        },
        {
            "number": 6,
            "title": "Crown the champion",
            "url": "policies",
            "what": "Make the version that won its evaluation live.",
            "role": "owner",
        },
    ]
    return render(
        request,
        "home.html",
        {
            "missions": missions,
            "world_rows": world_list_with_counts(),
            "versions": PolicyVersion.objects.select_related("parent"),
        },
    )


def public_index(request):
    workspaces = Workspace.objects.exclude(schema_name="public").prefetch_related("domains")
    return render(request, "public_index.html", {"workspaces": workspaces})
