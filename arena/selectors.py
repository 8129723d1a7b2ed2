"""Reads of the arena."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from arena.models import World


def world_list_with_counts() -> QuerySet[World]:
    return World.objects.annotate(
        call_count=Count("calls", distinct=True),
        won_count=Count("calls", filter=Q(calls__outcome="won"), distinct=True),
        scenario_count=Count("scenarios", distinct=True),
    )


def world_has_real_calls(world: World) -> bool:
    return world.calls.exists()


def world_customer_label(world: World) -> str:
    """Who plays the customer: never a model — real calls or the simulator's personas."""
    return "real recorded calls" if world_has_real_calls(world) else "simulated customers"
