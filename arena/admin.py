"""Workspace admin of the arena: worlds, scenarios, real calls (with upload), moments, replies."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse

from arena.models import Call, Judgement, Moment, Reply, Scenario, Turn, World
from arena.services import CallImportError, calls_import
from levers9.roles import MANAGER, RoleAdminMixin, has_role


class CallImportForm(forms.Form):
    file = forms.FileField(help_text="JSON array or JSONL: one call per line.")


class ScenarioInline(admin.TabularInline):
    model = Scenario
    extra = 0


@admin.register(World)
class WorldAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["name", "slug", "judge_label", "call_total", "scenario_total", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [ScenarioInline]
    change_form_template = "admin/arena/world/change_form.html"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                call_total=Count("calls", distinct=True),
                scenario_total=Count("scenarios", distinct=True),
            )
        )

    @admin.display(description="Real calls", ordering="call_total")
    def call_total(self, world: World) -> int:
        return world.call_total

    @admin.display(description="Scenarios", ordering="scenario_total")
    def scenario_total(self, world: World) -> int:
        return world.scenario_total

    def get_urls(self):
        return [
            path(
                "<int:world_id>/import-calls/",
                self.admin_site.admin_view(self.import_calls_view),
                name="arena_world_import_calls",
            ),
            *super().get_urls(),
        ]

    def import_calls_view(self, request, world_id: int):
        world = get_object_or_404(World, pk=world_id)
        if not has_role(request.user, MANAGER):
            messages.error(request, "Importing calls needs the manager role.")
            return redirect(reverse("admin:arena_world_change", args=[world.pk]))
        form = CallImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                text = upload.read().decode("utf-8")
                report = calls_import(world=world, text=text, source=upload.name)
            except UnicodeDecodeError:
                messages.error(request, "The file is not UTF-8 text: save it as UTF-8 JSON/JSONL.")
            except CallImportError as error:
                messages.error(request, str(error))
            else:
                messages.success(
                    request,
                    f"{report.created} calls imported ({report.turns_created} turns); "
                    f"{report.unchanged} were already there.",
                )
                return redirect(
                    reverse("admin:arena_call_changelist") + f"?world__id__exact={world.pk}"
                )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Import real calls into {world}",
            "form": form,
            "world": world,
            "opts": self.model._meta,
        }
        return render(request, "admin/arena/world/import_calls.html", context)


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    fields = ["index", "speaker", "text", "move_label", "move_label_source"]
    readonly_fields = ["index", "speaker", "text"]


@admin.register(Call)
class CallAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["external_id", "world", "outcome", "turn_count", "source", "imported_at"]
    list_filter = ["world", "outcome", "source"]
    search_fields = ["external_id", "turns__text"]
    readonly_fields = ["imported_at", "turn_count"]
    inlines = [TurnInline]
    list_select_related = ["world"]
    show_full_result_count = False


@admin.register(Turn)
class TurnAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["call", "index", "speaker", "short_text", "move_label", "move_label_source"]
    list_filter = ["speaker", "move_label", "move_label_source", "call__world"]
    search_fields = ["text", "call__external_id"]
    list_select_related = ["call"]
    readonly_fields = ["call", "index", "speaker", "text"]

    @admin.display(description="Text")
    def short_text(self, turn: Turn) -> str:
        return turn.text[:90]


@admin.register(Scenario)
class ScenarioAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["name", "world", "budget", "family", "urgency", "objection", "dialect", "seed"]
    list_filter = ["world", "budget", "family", "urgency", "objection", "dialect"]
    search_fields = ["name", "slug"]


class ReplyInline(admin.TabularInline):
    model = Reply
    extra = 0
    fields = ["source", "policy_version", "move", "text"]


@admin.register(Moment)
class MomentAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "world", "kind", "call", "turn_index", "scenario", "created_at"]
    list_filter = ["world", "kind"]
    search_fields = ["call__external_id"]
    raw_id_fields = ["call", "scenario"]
    inlines = [ReplyInline]


@admin.register(Reply)
class ReplyAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "moment", "source", "policy_version", "move", "short_text"]
    list_filter = ["source", "policy_version", "moment__world"]
    search_fields = ["text"]
    raw_id_fields = ["moment"]

    @admin.display(description="Text")
    def short_text(self, reply: Reply) -> str:
        return reply.text[:90]


@admin.register(Judgement)
class JudgementAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "reply", "judge_model", "total", "has_error", "created_at"]
    list_filter = ["judge_model"]
    raw_id_fields = ["reply"]
    readonly_fields = ["created_at"]

    @admin.display(boolean=True, description="Error")
    def has_error(self, judgement: Judgement) -> bool:
        return bool(judgement.error)
