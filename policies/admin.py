"""Workspace admin of the policy registry."""

from __future__ import annotations

from django.contrib import admin

from levers9.roles import OWNER, REVIEWER, RoleAdminMixin
from policies.models import PolicyVersion


@admin.register(PolicyVersion)
class PolicyVersionAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = REVIEWER
    change_role = OWNER
    list_display = ["label", "parent", "provider", "provider_model", "status", "created_at"]
    list_filter = ["provider", "status"]
    search_fields = ["name", "description", "provider_model"]
    readonly_fields = ["created_at", "created_by"]
