"""The commands' one question: which workspace and world a command line names."""

from __future__ import annotations

from django.core.management.base import CommandError

from levers9.models import Workspace


def workspace_named(slug: str) -> Workspace:
    found = Workspace.objects.filter(slug=slug).exclude(schema_name="public").first()
    if found is None:
        raise CommandError(f"No workspace '{slug}'.")
    return found


def world_named(pack: str, *, workspace: str):
    """Inside the workspace's schema: its world `pack`, or an error listing the worlds."""
    from arena.models import World

    world = World.objects.filter(slug=pack).first()
    if world is None:
        known = ", ".join(World.objects.values_list("slug", flat=True))
        raise CommandError(f"No world '{pack}' in '{workspace}' (worlds: {known}).")
    return world
