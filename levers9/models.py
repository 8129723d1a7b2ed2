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
    # The pools are shared: these keep one workspace from filling them. 20 waiting jobs is
    # more than a team starts by hand in a day, yet a runaway script stops there instead of
    # queueing hundreds (97 were measured holding others up for ten minutes). 4 running lets
    # one workspace fill the four-card node, but not that and every other pool at once.
    queued_jobs_limit = models.PositiveSmallIntegerField(
        default=20,
        help_text="Jobs that may wait for cards at once; starting one more is refused (429).",
    )
    running_jobs_limit = models.PositiveSmallIntegerField(
        default=4,
        help_text="Jobs that may hold cards at once; the next ones wait in line until one ends.",
    )

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


class GpuPool(models.Model):
    """A pool of cards (or CPU slots) with its own task-queue cluster.

    Workers on a pool's node run `qcluster` with LEVERS9_Q_CLUSTER=<cluster_name>, so they take
    only that pool's jobs. A job or a served version holds cards while it runs; requests that
    cannot be placed wait in order.
    """

    name = models.SlugField(max_length=60, unique=True)
    card_type = models.CharField(max_length=100, help_text='e.g. "RTX PRO 6000" or "cpu"')
    card_count = models.PositiveSmallIntegerField(default=4)
    cluster_name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(
        default=True, help_text="Offered on the Train page; a disabled pool takes no new jobs."
    )
    position = models.PositiveSmallIntegerField(
        default=10, help_text="Order on the Train page; the first enabled GPU pool is default."
    )

    class Meta:
        ordering = ["position", "name"]
        verbose_name = "GPU pool"

    def __str__(self) -> str:
        return f"{self.name} ({self.card_count} × {self.card_type})"

    @property
    def is_cpu(self) -> bool:
        return self.card_type.lower() == "cpu"


class CardAllocation(models.Model):
    """Cards requested by (then held by) a job or a served version of some workspace."""

    class State(models.TextChoices):
        WAITING = "waiting", "Waiting"
        HELD = "held", "Held"
        RELEASED = "released", "Released"

    pool = models.ForeignKey(GpuPool, on_delete=models.PROTECT, related_name="allocations")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE)
    holder_kind = models.CharField(max_length=20, help_text="job or endpoint")
    holder_id = models.PositiveIntegerField()
    holder_label = models.CharField(max_length=200, blank=True)
    card_count = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    requested_at = models.DateTimeField(auto_now_add=True)
    granted_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    expected_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="How long the holder was expected to hold the cards when it asked (a job's "
        "estimate; empty: not known). The line's wait estimates read it.",
    )

    class Meta:
        ordering = ["pool", "id"]
        indexes = [models.Index(fields=["pool", "state"])]

    def __str__(self) -> str:
        return f"{self.card_count} card(s) of {self.pool.name} for {self.holder_label}"
