"""Workspace admin of the policy registry: versions and endpoints.

Where a version runs, serving and releasing change through the services (Runs on, serve,
release); the admin shows those fields read-only and offers the operations as actions.
"""

from __future__ import annotations

from django.contrib import admin, messages

from levers9.roles import OWNER, REVIEWER, RoleAdminMixin
from policies.endpoints import endpoint_delete, endpoint_release, version_release
from policies.errors import PolicyError
from policies.models import Endpoint, PolicyVersion


def _each(modeladmin, request, items, operation, done: str) -> None:
    count = 0
    for item in items:
        try:
            operation(item)
        except PolicyError as error:
            modeladmin.message_user(request, f"{item}: {error}", messages.WARNING)
        else:
            count += 1
    if count:
        modeladmin.message_user(request, f"{done}: {count}.", messages.SUCCESS)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = REVIEWER
    change_role = OWNER
    list_display = ["label", "parent", "provider", "provider_model", "status", "created_at"]
    list_filter = ["provider", "status"]
    search_fields = ["name", "description", "provider_model"]
    readonly_fields = [
        "provider",
        "provider_model",
        "endpoint_url",
        "lora_adapter",
        "api_key_env",
        "status",
        "created_at",
        "created_by",
    ]
    actions = ["release"]

    @admin.action(description="Release the endpoint (cards back to the pool, weights kept)")
    def release(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda version: version_release(version=version),
            "Released",
        )


@admin.register(Endpoint)
class EndpointAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = OWNER
    change_role = OWNER
    list_display = [
        "id",
        "version",
        "kind",
        "state",
        "pool_name",
        "card_count",
        "card_allocation_id",
        "latency",
        "error_rate_shown",
        "created_at",
    ]
    list_filter = ["state", "kind", "pool_name"]
    search_fields = ["version__name", "url", "served_model"]
    actions = ["release"]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Endpoint._meta.fields]

    def has_add_permission(self, request, *args) -> bool:
        return False  # endpoints arrive by serving a version

    @admin.display(description="mean latency")
    def latency(self, endpoint: Endpoint) -> str:
        mean = endpoint.mean_latency_ms
        return "—" if mean is None else f"{mean:.0f} ms"

    @admin.display(description="error rate")
    def error_rate_shown(self, endpoint: Endpoint) -> str:
        rate = endpoint.error_rate
        return "—" if rate is None else f"{rate:.0%} of {endpoint.request_count}"

    @admin.action(description="Release (cards back to the pool, weights kept)")
    def release(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda endpoint: endpoint_release(endpoint=endpoint),
            "Released",
        )

    def delete_model(self, request, obj: Endpoint) -> None:
        endpoint_delete(endpoint=obj)

    def delete_queryset(self, request, queryset) -> None:
        for endpoint in queryset:
            endpoint_delete(endpoint=endpoint)
