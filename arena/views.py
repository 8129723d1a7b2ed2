"""Arena pages: real calls, and the mission pages later work fills in."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from arena.models import Call
from levers9.roles import MANAGER, OWNER, REVIEWER, role_required

PAGES = {
    "duel": ("Duel", REVIEWER, "Compare two replies at one moment and pick the better one."),
    "train": (
        "Train",
        MANAGER,
        "Make the next numbered version: move strategy, wording, benchmark.",
    ),
    "evaluate": (
        "Evaluate",
        MANAGER,
        "Two versions on the same calls: win rate, radar, regressions.",
    ),
    "policies": ("Policies", REVIEWER, "Every version with its lineage, provider and results."),
    "environment": ("Environment", MANAGER, "The world's judge and its rubric."),
    "engines": ("Engines", MANAGER, "Run a learning algorithm with knobs and measure it."),
    "endpoints": ("Endpoints", OWNER, "Where versions are served, and the cards they hold."),
    "release": (
        "Release",
        OWNER,
        "Canary: share live calls between the live version and a candidate.",
    ),
}


def placeholder(request, page: str):
    title, role, purpose = PAGES[page]

    @role_required(role)
    def show(request):
        return render(
            request,
            "placeholder.html",
            {"title": title, "purpose": purpose, "needed_role": role, "page": page},
        )

    return show(request)


@role_required(REVIEWER)
def call_list(request):
    calls = Call.objects.select_related("world").order_by("world__name", "external_id")
    world = request.GET.get("world")
    if world:
        calls = calls.filter(world__slug=world)
    outcome = request.GET.get("outcome")
    if outcome in {"won", "lost", "unknown"}:
        calls = calls.filter(outcome=outcome)
    page = Paginator(calls, 50).get_page(request.GET.get("page"))
    return render(request, "arena/call_list.html", {"page_obj": page, "outcome": outcome})


@role_required(REVIEWER)
def call_detail(request, call_id: int):
    call = get_object_or_404(Call.objects.select_related("world"), pk=call_id)
    return render(request, "arena/call_detail.html", {"call": call, "turns": call.turns.all()})
