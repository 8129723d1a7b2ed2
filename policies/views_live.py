"""Pages for Make live and Release (the canary)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from arena.selectors import world_in_view
from levers9.roles import OWNER, role_required
from policies.canary import (
    canary_comparison,
    canary_promote,
    canary_roll_back,
    canary_running,
    canary_share_from_percent,
    canary_start,
    caused_won_rates,
)
from policies.live import LiveError, live_history, live_version, version_make_live
from policies.models import LiveCall, PolicyVersion
from policies.selectors import policies_answering


@require_POST
@role_required(OWNER)
def version_make_live_view(request, version_id: int):
    version = get_object_or_404(PolicyVersion, pk=version_id)
    try:
        version_make_live(version=version, by=request.user)
    except LiveError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{version.label} is live.")
    return redirect(request.POST.get("next") or "policies")


@role_required(OWNER)
def release_page(request):
    """The world in view's live version, canary and live calls: each world has its own."""
    world = world_in_view(request)
    if world is None:
        return render(request, "policies/release.html", {"page": "release", "world": None})
    canary = canary_running(world=world)
    live = live_version(world=world)
    canary_rates = caused_won_rates(world=world, canary=canary) if canary else []
    recent_calls = LiveCall.objects.filter(version__world=world).select_related("version")
    return render(
        request,
        "policies/release.html",
        {
            "page": "release",
            "world": world,
            "live": live,
            "canary": canary,
            "canary_rates": canary_rates,
            "comparison": canary_comparison(canary=canary, rates=canary_rates) if canary else None,
            "all_time_rates": caused_won_rates(world=world),
            "candidates": [v for v in policies_answering(world=world) if v != live],
            "history": live_history(world=world),
            "recent_calls": recent_calls[:20],
        },
    )


def _whole_number(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


@require_POST
@role_required(OWNER)
def canary_action(request, action: str):
    world = world_in_view(request)
    try:
        if world is None:
            raise LiveError("Make a world first: each world has its own canary.")
        if action == "start":
            if not request.POST.get("candidate"):
                # The form's only option reads "no other answering version": say so, no 404.
                raise LiveError(
                    f"No candidate chosen: no other version of {world.name} can answer yet. "
                    "Train one, then start its canary."
                )
            candidate = PolicyVersion.objects.filter(
                pk=_whole_number(request.POST.get("candidate")), world=world
            ).first()
            if candidate is None:
                # Another world's version, or one that is gone: say so on the page, no 404.
                raise LiveError(
                    f"That candidate is not a version of {world.name}: each world releases "
                    "its own versions. Choose one from the list."
                )
            try:
                percent = float(request.POST.get("share_percent") or 0)
            except ValueError as error:
                raise LiveError("The share must be a number of percent, e.g. 10.") from error
            share = canary_share_from_percent(percent)
            canary_start(candidate=candidate, share=share, by=request.user)
            messages.success(request, f"{candidate.label} takes {share:.0%} of live calls.")
        else:
            canary = canary_running(world=world)
            if canary is None:
                raise LiveError("No canary is running.")
            if action == "promote":
                canary_promote(canary=canary, by=request.user)
                messages.success(request, f"{canary.candidate.label} is live.")
            else:
                canary_roll_back(canary=canary)
                messages.success(request, f"Rolled back: {canary.live.label} takes every call.")
    except LiveError as error:
        messages.error(request, str(error))
    return redirect("release")
