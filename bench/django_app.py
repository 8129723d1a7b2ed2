"""Django for the bench scripts that measure the app on PostgreSQL: its set-up, and the
throwaway workspaces they measure in, dropped at the end."""

from __future__ import annotations

import os
from pathlib import Path


def setup_django(datasets_dir: Path | None = None) -> None:
    """Django on DATABASE_URL, or else on the embedded server (started here if need be), with
    its datasets volume at `datasets_dir` where one is given.

    The settings read the datasets volume and the database address at import, so both are
    settled before Django is set up."""
    if datasets_dir is not None:
        os.environ["LEVERS9_DATASETS_DIR"] = str(datasets_dir)
    if not os.environ.get("DATABASE_URL"):
        from levers9 import embedded_pg

        embedded_pg.start(say=print)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def workspaces_drop(slugs: list[str]) -> int:
    """Drop the workspaces of these slugs with their domains and schemas; how many are left.

    By slug, so that a workspace whose creation failed half-way is removed too."""
    from levers9.models import Domain, Workspace

    for workspace in Workspace.objects.filter(slug__in=slugs):
        Domain.objects.filter(tenant=workspace).delete()
        workspace.delete(force_drop=True)
    return Workspace.objects.filter(slug__in=slugs).count()
