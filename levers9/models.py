"""Public-schema models: workspaces (tenants) and the host names that reach them."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models
from django_tenants.models import DomainMixin, TenantMixin

WORKSPACE_SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


def schema_name_for(slug: str) -> str:
    """PostgreSQL schema names cannot hold hyphens safely; slugs can."""
    return "ws_" + slug.replace("-", "_")


def validate_workspace_slug(slug: str) -> None:
    if not WORKSPACE_SLUG_PATTERN.match(slug) or slug in {"public", "www", "admin", "api"}:
        raise ValidationError(
            f"'{slug}' is not a usable workspace name: use 2-41 lowercase letters, digits and "
            "hyphens, starting with a letter (and not public, www, admin or api)."
        )


class Workspace(TenantMixin):
    """One business: its own PostgreSQL schema holds its users, worlds, picks and versions."""

    slug = models.SlugField(max_length=41, unique=True, validators=[validate_workspace_slug])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    auto_create_schema = True
    auto_drop_schema = True

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def is_public(self) -> bool:
        return self.schema_name == "public"


class Domain(DomainMixin):
    """A host name that routes to a workspace (``<slug>.localhost`` by default)."""

    class Meta:
        ordering = ["domain"]

    def __str__(self) -> str:
        return self.domain
