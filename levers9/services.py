"""Writes of the platform: workspaces, their domains and their first users."""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django_tenants.utils import get_public_schema_name, schema_context

from levers9.models import Domain, Workspace, schema_name_for, validate_workspace_slug
from levers9.roles import OWNER, roles_ensure_groups, user_set_role

# What every new workspace gets, in order, run inside its schema. Apps own their steps;
# the platform only knows their names, so it never imports the apps.
WORKSPACE_SETUP_STEPS: tuple[str, ...] = (
    "levers9.roles.roles_ensure_groups",
    "arena.services.worlds.world_create_lettings",
    "policies.services.policy_baseline_ensure",
)


@dataclass(frozen=True)
class WorkspaceCreated:
    workspace: Workspace
    domain: str
    created: bool
    seconds: float


def public_workspace_ensure() -> Workspace:
    """The public schema's own row, which routes the operators' admin at the public host.

    Also the platform's other defaults: the GPU pools.
    """
    from levers9.pools import pools_ensure_defaults

    pools_ensure_defaults()
    public, _created = Workspace.objects.get_or_create(
        schema_name=get_public_schema_name(), defaults={"slug": "public", "name": "Platform"}
    )
    Domain.objects.get_or_create(
        domain=settings.LEVERS9_PUBLIC_DOMAIN, defaults={"tenant": public, "is_primary": True}
    )
    return public


def workspace_domain_for(slug: str) -> str:
    return f"{slug}.{settings.LEVERS9_WORKSPACE_DOMAIN_SUFFIX}"


def _run_setup_steps() -> None:
    for dotted_path in WORKSPACE_SETUP_STEPS:
        module_name, _, name = dotted_path.rpartition(".")
        getattr(importlib.import_module(module_name), name)()


def workspace_user_create(*, email: str, password: str, role: str, superuser: bool = False):
    """A user of the current workspace with one role; staff so the admin can check the role."""
    User = get_user_model()
    email = email.strip().lower()
    if User.objects.filter(username=email).exists():
        raise ValidationError(f"A user {email} already exists in this workspace.")
    validate_password(password)
    user = User.objects.create_user(
        username=email, email=email, password=password, is_staff=True, is_superuser=superuser
    )
    roles_ensure_groups()
    user_set_role(user=user, role=role)
    return user


def workspace_create(
    *, slug: str, admin_email: str, password: str, name: str = "", domain: str = ""
) -> WorkspaceCreated:
    """Create a workspace: schema, domain, owner login, default world, `v1 · baseline`.

    Running it again for an existing slug changes nothing and says so (created=False).
    """
    started = time.perf_counter()
    validate_workspace_slug(slug)
    public_workspace_ensure()
    existing = Workspace.objects.filter(slug=slug).first()
    if existing:
        with schema_context(existing.schema_name):
            _run_setup_steps()  # a workspace from an older release gains new defaults
        return WorkspaceCreated(
            existing, existing.get_primary_domain().domain, False, time.perf_counter() - started
        )
    if not admin_email or "@" not in admin_email:
        raise ValidationError("Give the owner's e-mail address with --admin-email.")
    validate_password(password)
    domain = domain or workspace_domain_for(slug)
    if Domain.objects.filter(domain=domain).exists():
        raise ValidationError(f"The host name {domain} already belongs to another workspace.")
    workspace = Workspace(schema_name=schema_name_for(slug), slug=slug, name=name or slug.title())
    # verbosity=0: creating a schema would otherwise print every migration.
    workspace.save(verbosity=0)
    Domain.objects.create(domain=domain, tenant=workspace, is_primary=True)
    with schema_context(workspace.schema_name), transaction.atomic():
        _run_setup_steps()
        workspace_user_create(email=admin_email, password=password, role=OWNER, superuser=True)
    return WorkspaceCreated(workspace, domain, True, time.perf_counter() - started)
