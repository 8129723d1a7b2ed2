"""What the import commands share: which workspace and world a command line names, and
running one import service on a file inside that workspace."""

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


def import_file(command, *, file, workspace: str, pack: str, service, error_class, done) -> None:
    """Run `service(world=..., text=..., source=file name)` on `file` in the workspace's world
    and write `done(report, seconds)`; a refused file is a CommandError naming its bad lines."""
    import time

    from django.core.management.base import CommandError
    from django_tenants.utils import schema_context

    found = workspace_named(workspace)
    if not file.is_file():
        raise CommandError(f"No such file: {file}")
    with schema_context(found.schema_name):
        world = world_named(pack, workspace=workspace)
        started = time.perf_counter()
        try:
            report = service(world=world, text=file.read_text(encoding="utf-8"), source=file.name)
        except error_class as error:
            raise CommandError(str(error)) from error
        seconds = time.perf_counter() - started
    command.stdout.write(command.style.SUCCESS(done(report, seconds)))
