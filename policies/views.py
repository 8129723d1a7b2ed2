"""Pages of the policy registry: Policies (versions, Runs on, release and serve), Environment
(each world's judge) and Endpoints. Thin: parse, call one service, say what happened."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from arena.judging import DIMENSION_HELP, DIMENSION_LABELS, DIMENSIONS
from arena.models import World
from levers9.models import GpuPool
from levers9.roles import MANAGER, OWNER, REVIEWER, has_role, role_required
from policies.endpoints import endpoint_release, version_release, version_serve
from policies.errors import PolicyError
from policies.leaderboard import leaderboard
from policies.models import Endpoint, JudgeConnection, PolicyVersion
from policies.providers import provider_choices
from policies.selectors import endpoints_list, policy_live, versions_list
from policies.services import JUDGE_MODEL, version_runs_on_set, world_judge_set


def _world_in_view(request) -> World | None:
    slug = request.POST.get("world") or request.GET.get("world") or request.session.get("world")
    return World.objects.filter(slug=slug).first() or World.objects.order_by("name").first()


def versions_with_verdicts():
    """The version rows, each with its last evaluation's verdict when Evaluate has one."""
    import dataclasses
    import importlib

    rows = versions_list()
    try:
        verdicts = importlib.import_module("evaluation.selectors").version_verdicts()
    except (ImportError, AttributeError):
        return rows
    return [dataclasses.replace(row, evaluation=verdicts.get(row.version.pk)) for row in rows]


@role_required(REVIEWER)
def policies_page(request):
    world = _world_in_view(request)
    return render(
        request,
        "policies/policies.html",
        {
            "page": "policies",
            "rows": versions_with_verdicts(),
            "leaderboard": leaderboard(),
            "live": policy_live(),
            "can_change": has_role(request.user, OWNER),
            "choices": {choice.provider: choice for choice in provider_choices()},
            "judge_world": world,
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
            world=_world_in_view(request) if provider == JUDGE_MODEL else None,
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


@role_required(MANAGER)
def environment_page(request):
    worlds = list(World.objects.order_by("name"))
    connections = {c.world_id: c for c in JudgeConnection.objects.filter(world__in=worlds)}
    return render(
        request,
        "policies/environment.html",
        {
            "page": "environment",
            "worlds": [(world, connections.get(world.pk)) for world in worlds],
            "choices": {choice.provider: choice for choice in provider_choices()},
            "dimensions": [
                (name, DIMENSION_LABELS[name], DIMENSION_HELP[name]) for name in DIMENSIONS
            ],
        },
    )


@require_POST
@role_required(MANAGER)
def world_judge(request, slug: str):
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
    except PolicyError as error:
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
