"""How long creating a workspace (tenant) takes, and how fast real calls import into one.

    python -m bench.tenancy_and_import

Needs PostgreSQL: DATABASE_URL, or else the embedded server (started here if need be). Creates
three throwaway workspaces ``bench-<hex>``, imports the PersuasionForGood calls into one of them
twice (the second import must create nothing), then drops the workspaces, their schemas and
their domains, so the bench leaves nothing behind.
"""

from __future__ import annotations

import secrets
import statistics
import time

from bench.django_app import setup_django, workspaces_drop
from levers9.shipped_data import DATA_DIR, PERSUASION_CALLS

WORKSPACES = 3
ADMIN_EMAIL = "bench@x.test"


def _bench_workspace_creation(slugs: list[str]) -> list:
    from levers9.services import workspace_create

    password = secrets.token_urlsafe(24)
    print(f"Workspace creation ({len(slugs)} fresh workspaces)")
    workspaces, seconds = [], []
    for slug in slugs:
        started = time.perf_counter()
        created = workspace_create(slug=slug, admin_email=ADMIN_EMAIL, password=password)
        seconds.append(time.perf_counter() - started)
        if not created.created:
            raise SystemExit(f"{slug} already existed: the bench needs fresh workspaces")
        workspaces.append(created.workspace)
        print(f"  {slug:<24} {seconds[-1]:8.3f} s")
    print(f"  {'median':<24} {statistics.median(seconds):8.3f} s")
    return workspaces


def _bench_import(workspace) -> bool:
    """Import the calls twice into `workspace`; True when the second import created nothing."""
    from django_tenants.utils import schema_context

    from arena.services.calls import calls_import
    from arena.services.worlds import world_create

    text = PERSUASION_CALLS.read_text()
    source = str(PERSUASION_CALLS.relative_to(DATA_DIR.parent))
    print()
    print(f"Real-call import: {source} into {workspace.slug}")
    with schema_context(workspace.schema_name):
        world = world_create(slug="bench", name="Bench")
        started = time.perf_counter()
        first = calls_import(world=world, text=text, source=source)
        first_seconds = time.perf_counter() - started
        started = time.perf_counter()
        again = calls_import(world=world, text=text, source=source)
        again_seconds = time.perf_counter() - started
    print(
        f"  first import  {first.created:6d} calls {first.turns_created:7d} turns "
        f"{first_seconds:8.3f} s {first.created / first_seconds:9.1f} calls/s"
    )
    idempotent = again.created == 0 and again.turns_created == 0
    verdict = "idempotent" if idempotent else "NOT IDEMPOTENT"
    print(
        f"  re-import     {again.created:6d} created {again.unchanged:5d} unchanged "
        f"{again_seconds:8.3f} s  ({verdict})"
    )
    return idempotent


def _delete_workspaces(slugs: list[str]) -> None:
    left = workspaces_drop(slugs)
    print()
    print(f"Deleted the {len(slugs)} bench workspaces and their schemas ({left} left).")


def main() -> None:
    setup_django()
    slugs = [f"bench-{secrets.token_hex(4)}" for _ in range(WORKSPACES)]
    try:
        workspaces = _bench_workspace_creation(slugs)
        idempotent = _bench_import(workspaces[0])
    finally:
        _delete_workspaces(slugs)
    if not idempotent:
        raise SystemExit("The second import created calls: calls_import is not idempotent.")


if __name__ == "__main__":
    main()
