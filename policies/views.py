"""Pages of the policy registry: Policies (versions, Runs on, release and serve), setting a
world's judge (the Environment page itself is arena's) and Endpoints. Thin: parse, call one
service, say what happened."""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from arena.errors import DuelError, ModelConnectionError
from arena.judge.world_judge_choice import world_judge_set
from arena.models import World
from arena.selectors import world_description, world_in_view
from arena.services.worlds import world_system_prompt_set
from levers9.models import GpuPool
from levers9.providers import provider_choices
from levers9.roles import MANAGER, OWNER, REVIEWER, has_role, role_required
from policies.canary import canary_running
from policies.endpoints import endpoint_release, version_release, version_serve
from policies.errors import PolicyError
from policies.leaderboard import leaderboard, leaderboard_left_out
from policies.live import make_live_warnings
from policies.models import Endpoint, PolicyVersion
from policies.selectors import (
    VersionRow,
    endpoints_list,
    policy_live,
    simulator_answers,
    versions_with_verdicts,
)
from policies.services import JUDGE_MODEL, version_runs_on_set


def _rows_with_warnings(world: World) -> list[VersionRow]:
    """`world`'s version rows, each with what Make live warns of (as the admin does)."""
    canary = canary_running(world=world)
    return [
        dataclasses.replace(
            row,
            make_live_warnings=make_live_warnings(
                version=row.version, evaluation=row.evaluation, canary=canary
            ),
        )
        for row in versions_with_verdicts(world=world)
    ]


@role_required(REVIEWER)
def policies_page(request):
    world = world_in_view(request)
    return render(
        request,
        "policies/policies.html",
        {
            "page": "policies",
            # The world in view's versions only: each world has its own (policies.models).
            "rows": _rows_with_warnings(world) if world else [],
            "can_edit_prompt": has_role(request.user, MANAGER),
            "leaderboard": leaderboard(world=world) if world else [],
            "leaderboard_left_out": leaderboard_left_out(world=world) if world else [],
            "live": policy_live(world=world) if world else None,
            "can_change": has_role(request.user, OWNER),
            "choices": {choice.provider: choice for choice in provider_choices()},
            "judge_world": world,
            # What "Back to the simulator" answers with in this world (as the header says).
            "simulator_answers": simulator_answers(described=world_description(world))
            if world
            else None,
            # GPU pools first: serving again goes back to cards unless someone picks the CPU.
            "pools": sorted(
                GpuPool.objects.filter(enabled=True).order_by("position", "name"),
                key=lambda pool: pool.is_cpu,
            ),
        },
    )


@require_POST
@role_required(OWNER)
def version_runs_on(request, version_id: int):
    version = get_object_or_404(PolicyVersion, pk=version_id)
    provider = request.POST.get("provider", "")
    try:
        version = version_runs_on_set(
            version=version,
            provider=provider,
            model=request.POST.get("model", ""),
            endpoint_url=request.POST.get("endpoint_url", ""),
            lora_adapter=request.POST.get("lora_adapter", ""),
            api_key_env=request.POST.get("api_key_env", ""),
            # The version's own world's judge: a version answers in its own world.
            world=version.world if provider == JUDGE_MODEL else None,
        )
    except PolicyError as error:
        messages.error(request, str(error))
        return redirect("policies")
    messages.success(request, f"{version.label} now runs on {version.get_provider_display()}.")
    return redirect("policies")


@require_POST
@role_required(OWNER)
def version_release_view(request, version_id: int):
    version = get_object_or_404(PolicyVersion, pk=version_id)
    try:
        version_release(version=version)
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request, f"{version.label} is released: its cards are free; its weights stay."
        )
    return redirect(request.POST.get("next") or "policies")


@require_POST
@role_required(OWNER)
def version_serve_view(request, version_id: int):
    version = get_object_or_404(PolicyVersion, pk=version_id)
    try:
        endpoint = version_serve(
            version=version,
            gpu_count=request.POST.get("gpu_count", ""),
            pool_name=request.POST.get("pool", ""),
            started_by=request.user,
        )
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request,
            f"Serving {version.label} on {endpoint.card_count} × {endpoint.card_type}: "
            f"job {endpoint.job_id} starts endpoint {endpoint.pk}.",
        )
    return redirect("policies")


@require_POST
@role_required(OWNER)
def world_judge(request, slug: str):
    """Environment → Judge's form: which judge scores a world, and where its model runs. An
    owner's setting, as Runs on is: the server calls the address and reads the key named."""
    world = get_object_or_404(World, slug=slug)
    try:
        world = world_judge_set(
            world=world,
            provider=request.POST.get("provider", ""),
            model=request.POST.get("model", ""),
            endpoint_url=request.POST.get("endpoint_url", ""),
            lora_adapter=request.POST.get("lora_adapter", ""),
            api_key_env=request.POST.get("api_key_env", ""),
        )
    except ModelConnectionError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{world.name} is now judged by the {world.judge_label}.")
    return redirect("environment")


@role_required(OWNER)
def endpoints_page(request):
    return render(
        request, "policies/endpoints.html", {"page": "endpoints", "endpoints": endpoints_list()}
    )


@require_POST
@role_required(OWNER)
def endpoint_release_view(request, endpoint_id: int):
    endpoint = get_object_or_404(Endpoint, pk=endpoint_id)
    try:
        endpoint_release(endpoint=endpoint)
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Endpoint {endpoint.pk} released: its cards are free.")
    return redirect("endpoints")


@require_POST
@role_required(MANAGER)
def world_system_prompt(request, slug: str):
    """The agent's system prompt of a world: what every conversation opens with, trained and
    served alike."""
    world = get_object_or_404(World, slug=slug)
    try:
        world = world_system_prompt_set(
            world=world, system_prompt=request.POST.get("system_prompt", "")
        )
    except DuelError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"The agent's system prompt of {world.name} is saved.")
    return redirect(f"{reverse('policies')}?world={world.slug}")
