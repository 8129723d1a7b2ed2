"""Public admin: workspaces and their host names, the GPU pools and who holds their cards
(platform operators, superusers only)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from levers9.models import CardAllocation, Domain, GpuPool, Workspace
from levers9.services import workspace_create


class DomainInline(admin.TabularInline):
    model = Domain
    extra = 0


class WorkspaceCreationForm(forms.ModelForm):
    admin_email = forms.EmailField(help_text="The owner's login in the new workspace.")
    password = forms.CharField(widget=forms.PasswordInput, help_text="The owner's password.")

    class Meta:
        model = Workspace
        fields = ["slug", "name"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "schema_name",
        "primary_domain",
        "jobs_in_line",
        "queued_jobs_limit",
        "running_jobs_limit",
        "created_at",
    ]
    # The operator's lever on fair shares: raise or lower a workspace's limits from the list.
    list_editable = ["queued_jobs_limit", "running_jobs_limit"]
    search_fields = ["slug", "name", "domains__domain"]
    readonly_fields = ["schema_name", "created_at"]
    inlines = [DomainInline]

    @admin.display(description="Address")
    def primary_domain(self, workspace: Workspace) -> str:
        domain = workspace.domains.filter(is_primary=True).first()
        return domain.domain if domain else "—"

    @admin.display(description="Jobs waiting · running")
    def jobs_in_line(self, workspace: Workspace) -> str:
        allocations = CardAllocation.objects.filter(workspace=workspace, holder_kind="job")
        waiting = allocations.filter(state=CardAllocation.State.WAITING).count()
        running = allocations.filter(state=CardAllocation.State.HELD).count()
        return f"{waiting} · {running}"

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = WorkspaceCreationForm
        return super().get_form(request, obj, **kwargs)

    def get_inlines(self, request, obj):
        return self.inlines if obj else []

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "slug"] if obj else []

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        try:
            result = workspace_create(
                slug=form.cleaned_data["slug"],
                name=form.cleaned_data["name"],
                admin_email=form.cleaned_data["admin_email"],
                password=form.cleaned_data["password"],
            )
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
            raise
        obj.pk = result.workspace.pk
        obj.schema_name = result.workspace.schema_name
        messages.success(request, f"Workspace created at http://{result.domain}:8000/")
        return None

    def has_delete_permission(self, request, obj=None) -> bool:
        # Deleting drops a whole schema: never from a list page by accident.
        return obj is not None and not obj.is_public and request.user.is_superuser


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ["domain", "tenant", "is_primary"]
    list_filter = ["is_primary"]
    search_fields = ["domain", "tenant__slug"]


@admin.register(GpuPool)
class GpuPoolAdmin(admin.ModelAdmin):
    """The pools the Train page offers: add a node's pool, disable one, order them; the list
    says how busy each is now."""

    list_display = [
        "name",
        "card_type",
        "card_count",
        "cards_held",
        "requests_waiting",
        "cluster_name",
        "enabled",
        "position",
    ]
    list_editable = ["enabled", "position"]
    list_filter = ["enabled"]
    search_fields = ["name", "card_type", "cluster_name"]

    @admin.display(description="Cards held")
    def cards_held(self, pool: GpuPool) -> int:
        held = pool.allocations.filter(state=CardAllocation.State.HELD)
        return sum(held.values_list("card_count", flat=True))

    @admin.display(description="Waiting requests")
    def requests_waiting(self, pool: GpuPool) -> int:
        return pool.allocations.filter(state=CardAllocation.State.WAITING).count()

    def has_delete_permission(self, request, obj=None) -> bool:
        # Jobs and endpoints of every workspace point at a pool: disable it instead.
        return False


@admin.register(CardAllocation)
class CardAllocationAdmin(admin.ModelAdmin):
    """Who holds or waits for which cards, every workspace: read-only (the pools' own
    services grant and free cards; an edit here would desynchronise them)."""

    list_display = [
        "pool",
        "workspace",
        "holder_kind",
        "holder_id",
        "holder_label",
        "card_count",
        "state",
        "requested_at",
    ]
    list_filter = ["state", "pool", "holder_kind"]
    search_fields = ["workspace__slug", "holder_label"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
