"""Workspace admin of invitations: the owners' list, with withdraw as an action. New ones are
made on the Users page or the API, the only places that can show the link (its token is kept
as a hash, so the admin could never show it)."""

from __future__ import annotations

from django.contrib import admin, messages

from levers9.roles import OWNER, RoleAdminMixin
from levers9.users.models import Invitation
from levers9.users.services import invitation_revoke


@admin.register(Invitation)
class InvitationAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = OWNER
    change_role = OWNER
    list_display = ["email", "role", "state", "invited_by", "created_at", "expires_at"]
    list_filter = ["role"]
    search_fields = ["email"]
    actions = ["withdraw"]
    exclude = ["token_hash"]
    readonly_fields = [
        "email",
        "role",
        "invited_by",
        "created_at",
        "expires_at",
        "accepted_at",
        "revoked_at",
    ]

    def has_add_permission(self, request, *args) -> bool:
        return False  # the Users page makes them: it alone can show the link

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # withdraw instead: the row says who was invited, and when

    @admin.display(description="State")
    def state(self, invitation: Invitation) -> str:
        return Invitation.State(invitation.state).label

    @admin.action(description="Withdraw the selected invitations (their links stop working)")
    def withdraw(self, request, queryset) -> None:
        for invitation in queryset:
            invitation_revoke(invitation=invitation)
        messages.success(request, f"{queryset.count()} invitation(s) withdrawn.")
