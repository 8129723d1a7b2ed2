"""Workspace admin of the arena: worlds, scenarios, real calls (with upload), moments, replies,
the Duel's pairs, picks (freeze as an action), overrides (rescore) and preference versions, and
each world's judge connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from arena.errors import DuelError
from arena.judge.overrides import judgements_rescore
from arena.models import (
    Call,
    DuelPair,
    JudgeConnection,
    Judgement,
    JudgeOverride,
    JudgeVersion,
    Moment,
    Pick,
    PreferenceVersion,
    Reply,
    Scenario,
    Turn,
    World,
)
from arena.moves import (
    MAX_MOVES,
    MIN_MOVES,
    MovesInvalid,
    move_label,
    move_names,
    moves_as_text,
    moves_from_text,
)
from arena.selectors import picks_frozen, picks_with_version
from arena.services.calls import CallImportError, calls_import
from arena.services.freeze import preference_freeze
from arena.services.preferences import PreferenceImportError, preferences_import
from arena.services.queue import duel_pairs_request_opinion, duel_reservations_release
from arena.services.worlds import WorldBadInput, world_create, world_update
from levers9.roles import MANAGER, RoleAdminMixin, has_role
from trainers.judge.standing import measure_text
from trainers.moves.simulator import MOVES


class CallImportForm(forms.Form):
    file = forms.FileField(help_text="A UTF-8 JSON or JSONL file, one record per line.")


class ScenarioInline(admin.TabularInline):
    model = Scenario
    extra = 0


class WorldAdminForm(forms.ModelForm):
    """A world's moves edited as text, one "name: description" a line, checked by the same
    rules as the API and the World page (arena.moves.moves_clean)."""

    moves = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "cols": 80}),
        required=False,
        help_text=f"One move a line, <code>name: what it is</code>; {MIN_MOVES} to "
        f"{MAX_MOVES}, names unique. Blank: the generic set.",
    )

    class Meta:
        model = World
        fields = ["slug", "name", "description", "system_prompt", "moves"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["moves"] = moves_as_text(self.instance.moves)
        if self.instance.pk and "slug" in self.fields:  # absent where the form is only viewed
            # The slug is the world's address in pages, the API and frozen picks.
            self.fields["slug"].disabled = True

    def clean_moves(self) -> list[dict[str, str]] | None:
        text = self.cleaned_data.get("moves") or ""
        if not text.strip():
            return None if not self.instance.pk else self.instance.moves
        try:
            return moves_from_text(text)
        except MovesInvalid as error:
            raise forms.ValidationError(str(error)) from None


def _judge_figure(version: JudgeVersion, measure: str, key: str, judge: str) -> str:
    """The figure with its bootstrap interval, "0.71 [0.60, 0.80]", or "too few to measure
    (n = 4)" (trainers.judge.standing)."""
    return measure_text((version.report.get(measure) or {}).get(judge), measure, digits=2)


@admin.register(World)
class WorldAdmin(RoleAdminMixin, admin.ModelAdmin):
    form = WorldAdminForm
    list_display = [
        "name",
        "slug",
        "move_count",
        "judge_label",
        "call_total",
        "scenario_total",
        "created_at",
    ]
    search_fields = ["name", "slug"]
    inlines = [ScenarioInline]
    readonly_fields = ["judge_versions_shown"]
    change_form_template = "admin/arena/world/change_form.html"

    @admin.display(description="Moves")
    def move_count(self, world: World) -> int:
        return len(world.moves)

    @admin.display(description="Judge versions (held-out agreement, read only)")
    def judge_versions_shown(self, world: World) -> str:
        """Each fitted judge version beside the rubric, as its fit measured them; versions
        come from fits (Environment → Judge, the API), never from this form."""
        versions = list(world.judge_versions.order_by("-number")) if world.pk else []
        if not versions:
            return "No fitted judge yet: the rubric judge scores this world."
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    version.label,
                    _judge_figure(version, "pairs", "accuracy", "fitted"),
                    _judge_figure(version, "pairs", "accuracy", "rubric"),
                    _judge_figure(version, "outcomes", "auc", "fitted"),
                    _judge_figure(version, "outcomes", "auc", "rubric"),
                    "yes" if version.at_chance else "no",
                )
                for version in versions
            ),
        )
        return format_html(
            "<table><thead><tr><th>Version</th><th>Pair accuracy</th><th>Rubric's</th>"
            "<th>Outcome AUC by call</th><th>Rubric's</th><th>At chance</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    def save_model(self, request, obj, form, change):
        """Through the world services, like the API and the World page."""
        data = form.cleaned_data
        fields = {
            "name": data["name"],
            "description": data.get("description", ""),
            "system_prompt": data.get("system_prompt", ""),
        }
        try:
            if change:
                saved = world_update(world=obj, moves=data["moves"], **fields)
            else:
                saved = world_create(slug=data["slug"], moves=data["moves"], **fields)
        except WorldBadInput as error:
            # The form's own checks ran first; a service refusal is still named, not lost.
            self.message_user(request, str(error), messages.ERROR)
            return
        obj.pk = saved.pk
        obj.refresh_from_db()

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
            path(
                "<int:world_id>/import-preferences/",
                self.admin_site.admin_view(self.import_preferences_view),
                name="arena_world_import_preferences",
            ),
            *super().get_urls(),
        ]

    def import_calls_view(self, request, world_id: int):
        return self._import_view(request, world_id, IMPORTS["calls"])

    def import_preferences_view(self, request, world_id: int):
        return self._import_view(request, world_id, IMPORTS["preferences"])

    def _import_view(self, request, world_id: int, kind: _Import):
        """One upload page for both imports: the same service as the API and the command."""
        world = get_object_or_404(World, pk=world_id)
        if not has_role(request.user, MANAGER):
            messages.error(request, f"Importing {kind.what} needs the manager role.")
            return redirect(reverse("admin:arena_world_change", args=[world.pk]))
        form = CallImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                # The bytes as uploaded: the import names a line that is not UTF-8.
                report = kind.service(world=world, text=upload.read(), source=upload.name)
            except (CallImportError, PreferenceImportError) as error:
                messages.error(request, str(error))
            else:
                messages.success(request, kind.done(report))
                return redirect(reverse(kind.after) + f"?world__id__exact={world.pk}")
        context = {
            **self.admin_site.each_context(request),
            "title": f"Import {kind.what} into {world}",
            "form": form,
            "world": world,
            "opts": self.model._meta,
            "kind": kind.name,
        }
        return render(request, "admin/arena/world/import_calls.html", context)


@dataclass(frozen=True)
class _Import:
    name: str
    what: str
    service: Callable[..., Any]
    done: Callable[[Any], str]
    after: str


IMPORTS = {
    "calls": _Import(
        "calls",
        "real calls",
        calls_import,
        lambda report: (
            f"{report.created} calls imported ({report.turns_created} turns); "
            f"{report.unchanged} were already there."
        ),
        "admin:arena_call_changelist",
    ),
    "preferences": _Import(
        "preferences",
        "preference pairs",
        preferences_import,
        lambda report: (
            f"{report.created} preference pairs imported as picks; "
            f"{report.unchanged} were already there."
        ),
        "admin:arena_pick_changelist",
    ),
}


@admin.register(JudgeVersion)
class JudgeVersionAdmin(RoleAdminMixin, admin.ModelAdmin):
    """Each world's fitted judge versions with their held-out agreement (read only)."""

    list_display = [
        "world",
        "label",
        "reads_with",
        "pair_accuracy",
        "outcome_auc",
        "at_chance",
        "created_at",
    ]
    list_filter = ["world"]
    readonly_fields = ["world", "number", "job_id", "model_dir", "report", "created_at"]

    def has_add_permission(self, request, *args) -> bool:
        return False  # versions come from fits (Environment → Judge, the API)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Reads replies with")
    def reads_with(self, version: JudgeVersion) -> str:
        """The base and the parts the fit kept for the total and for won, or the words."""
        scorer = (version.report or {}).get("scorer") or {}
        if not scorer.get("base"):
            return "words" + (" (its base was missing)" if scorer.get("base_missing") else "")
        floor = (scorer.get("answers") or {}).get("floor")
        answers = f", answer floor {floor:.2f}" if floor is not None else ""
        return f"{scorer['base']}: total {scorer.get('total')}, won {scorer.get('won')}{answers}"

    @admin.display(description="Pair accuracy (held out)")
    def pair_accuracy(self, version: JudgeVersion) -> str:
        return _judge_figure(version, "pairs", "accuracy", "fitted")

    @admin.display(description="Outcome AUC by call (held out)")
    def outcome_auc(self, version: JudgeVersion) -> str:
        return _judge_figure(version, "outcomes", "auc", "fitted")

    @admin.display(description="At chance", boolean=True)
    def at_chance(self, version: JudgeVersion) -> bool:
        return version.at_chance


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


def _move_choices() -> list[tuple[str, str]]:
    """Every world's own moves (a changelist mixes worlds), and the simulator's eight, which
    the move classifier still writes everywhere (trainers.moves.labels)."""
    names: dict[str, str] = {name: move_label(name) for name in MOVES}
    for moves in World.objects.values_list("moves", flat=True):
        for name in move_names(moves):
            names.setdefault(name, move_label(name))
    return [("", "—"), *names.items()]


@admin.register(Turn)
class TurnAdmin(RoleAdminMixin, admin.ModelAdmin):
    """Move labels: the classifier's guess, corrected here by a reviewer (the rules are in
    trainers/moves/labels.py, MOVE_RULES)."""

    list_display = ["call", "index", "speaker", "short_text", "move_label", "move_label_source"]
    list_filter = ["speaker", "move_label", "move_label_source", "call__world"]
    search_fields = ["text", "call__external_id"]
    list_select_related = ["call"]
    list_editable = ["move_label"]
    readonly_fields = ["call", "index", "speaker", "text", "move_label_source"]

    def has_add_permission(self, request) -> bool:
        # A turn belongs to its call, made by the import: one added alone had no call and no
        # place in it (its save failed in the database, a 500).
        return False

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "move_label":
            return forms.ChoiceField(choices=_move_choices(), required=False, label="Move")
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if "move_label" in form.changed_data:
            # A person's correction outranks the classifier and is never relabelled.
            obj.move_label_source = "reviewer"
        super().save_model(request, obj, form, change)

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
    fields = ["source", "move", "text"]


@admin.register(Moment)
class MomentAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "world", "kind", "call", "turn_index", "scenario", "created_at"]
    list_filter = ["world", "kind"]
    search_fields = ["call__external_id"]
    raw_id_fields = ["call", "scenario"]
    inlines = [ReplyInline]


@admin.register(Reply)
class ReplyAdmin(RoleAdminMixin, admin.ModelAdmin):
    # Which version wrote a reply is the registry's (the Policies admin's "Reply authors").
    list_display = ["id", "moment", "source", "move", "short_text"]
    list_filter = ["source", "moment__world"]
    search_fields = ["text"]
    raw_id_fields = ["moment"]

    @admin.display(description="Text")
    def short_text(self, reply: Reply) -> str:
        return reply.text[:90]


@admin.register(Judgement)
class JudgementAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "reply", "judge_model", "total", "overruled", "has_error", "created_at"]
    list_filter = ["judge_model", "overruled"]
    raw_id_fields = ["reply"]
    readonly_fields = ["created_at"]

    @admin.display(boolean=True, description="Error")
    def has_error(self, judgement: Judgement) -> bool:
        return bool(judgement.error)


# --- the Duel -------------------------------------------------------------------------------


@admin.register(DuelPair)
class DuelPairAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "world",
        "moment_kind",
        "scenario",
        "judge_total",
        "moves",
        "previous_move",
        "picks",
        "reservation",
        "frozen_in",
        "created_at",
    ]
    list_filter = [
        "world",
        "is_open",
        "moment__kind",
        "scenario",
        ("frozen_in", admin.EmptyFieldListFilter),
        "picks_wanted",
    ]
    search_fields = ["moment__call__external_id", "reply_a__text", "reply_b__text", "dialogue"]
    list_select_related = ["world", "moment", "scenario", "reserved_by", "frozen_in"]
    raw_id_fields = ["moment", "reply_a", "reply_b"]
    readonly_fields = [
        "world",
        "moment",
        "scenario",
        "reply_a",
        "reply_b",
        "dialogue",
        "judge_model",
        "judge_total",
        "move_a",
        "move_b",
        "previous_move",
        "pick_count",
        "is_open",
        "reserved_by",
        "reserved_until",
        "frozen_in",
        "created_at",
    ]
    actions = ["ask_another_opinion", "release_reservations"]
    show_full_result_count = False

    def has_add_permission(self, request, *args) -> bool:
        return False  # pairs come from duel_pairs_generate, never by hand

    @admin.display(description="Moment", ordering="moment__kind")
    def moment_kind(self, pair: DuelPair) -> str:
        return pair.moment.get_kind_display()

    @admin.display(description="Moves (A / B)")
    def moves(self, pair: DuelPair) -> str:
        return f"{pair.move_a or '—'} / {pair.move_b or '—'}"

    @admin.display(description="Picks", ordering="pick_count")
    def picks(self, pair: DuelPair) -> str:
        return f"{pair.pick_count} of {pair.picks_wanted}"

    @admin.display(description="Reserved")
    def reservation(self, pair: DuelPair) -> str:
        if pair.reserved_by_id and pair.reserved_until and pair.reserved_until > timezone.now():
            return f"{pair.reserved_by} until {pair.reserved_until:%H:%M:%S}"
        return "—"

    @admin.action(description="Ask one more reviewer for the selected pairs")
    def ask_another_opinion(self, request, queryset):
        count = duel_pairs_request_opinion(pairs=queryset)
        self.message_user(request, f"{count} pairs are back in the queue for one more pick.")

    @admin.action(description="Release the reservations of the selected pairs")
    def release_reservations(self, request, queryset):
        count = duel_reservations_release(pairs=queryset)
        self.message_user(request, f"Released {count} reservations.")


class PickFrozenFilter(admin.SimpleListFilter):
    title = "frozen"
    parameter_name = "frozen"

    def lookups(self, request, model_admin):
        return [("yes", "Frozen"), ("no", "Not frozen yet")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return picks_frozen(queryset, frozen=self.value() == "yes")
        return queryset


@admin.register(Pick)
class PickAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "world",
        "pair",
        "kind",
        "chosen_side",
        "chosen_source",
        "rejected_source",
        "reason_list",
        "reviewer_name",
        "created_at",
        "frozen_in",
    ]
    list_filter = [PickFrozenFilter, "world", "kind", "chosen_side", "chosen_source"]
    search_fields = ["reviewer_name", "note", "chosen_reply__text", "rejected_reply__text"]
    list_select_related = ["world"]
    readonly_fields = [
        "pair",
        "world",
        "chosen_side",
        "chosen_reply",
        "rejected_reply",
        "chosen_source",
        "rejected_source",
        "reasons",
        "kind",
        "note",
        "reviewer",
        "reviewer_name",
        "created_at",
    ]
    actions = ["freeze_selected"]
    date_hierarchy = "created_at"
    show_full_result_count = False

    def has_add_permission(self, request, *args) -> bool:
        return False  # picks come from the Duel only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a pick is kept: frozen versions and agreement figures rest on it

    def has_freeze_permission(self, request) -> bool:
        return has_role(request.user, MANAGER)

    def get_queryset(self, request):
        return picks_with_version(super().get_queryset(request))

    @admin.display(description="Reasons")
    def reason_list(self, pick: Pick) -> str:
        return ", ".join(pick.reasons) or "—"

    @admin.display(description="Frozen in", ordering="frozen_in_number")
    def frozen_in(self, pick: Pick) -> str:
        return f"v{pick.frozen_in_number}" if pick.frozen_in_number else "—"

    @admin.action(
        description="Freeze the picks not frozen yet, in each selected pick's world, up to the "
        "newest selected one there",
        permissions=["freeze"],
    )
    def freeze_selected(self, request, queryset):
        # Each world freezes into its own versions: a selection across worlds makes one
        # version in each.
        newest_by_world = queryset.values("world").annotate(newest=Max("id")).order_by("world")
        for row in newest_by_world:
            world = World.objects.get(pk=row["world"])
            try:
                version = preference_freeze(
                    world=world, by=request.user, up_to_pick_id=row["newest"]
                )
            except DuelError as error:
                self.message_user(request, str(error), level=messages.ERROR)
                continue
            self.message_user(
                request,
                f"Froze {world.name} {version.label}: {version.picks_added} new picks, "
                f"{version.row_count} in all.",
                level=messages.SUCCESS,
            )


@admin.register(JudgeOverride)
class JudgeOverrideAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = ["id", "reply", "judge_model", "overruled", "reviewer_name", "updated_at"]
    list_filter = ["judge_model", "reply__moment__world"]
    search_fields = ["reviewer_name", "reply__text", "note"]
    list_select_related = ["reply"]
    readonly_fields = [
        "reply",
        "judge_model",
        "judge_scores",
        "reviewer",
        "created_at",
        "updated_at",
    ]
    actions = ["rescore"]

    def has_add_permission(self, request, *args) -> bool:
        return False  # reviewers overrule from the Duel or the API

    def has_rescore_permission(self, request) -> bool:
        return has_role(request.user, MANAGER)

    @admin.display(description="Overruled")
    def overruled(self, override: JudgeOverride) -> str:
        return ", ".join(
            f"{name} {override.judge_scores.get(name, 0):.2f}→{value:.2f}"
            for name, value in override.scores.items()
        )

    @admin.action(
        description="Rescore the overruled replies (all of them)", permissions=["rescore"]
    )
    def rescore(self, request, queryset):
        report = judgements_rescore()
        rates = ", ".join(
            f"{name} {row['rate']:.0%}"
            for name, row in report.agreement.items()
            if row["rate"] is not None
        )
        self.message_user(
            request,
            f"Rescored {report.replies_rescored} replies ({report.pairs_reordered} pairs "
            f"reordered). Judge–reviewer agreement: {rates or 'no overrides yet'}.",
            level=messages.SUCCESS,
        )


@admin.register(PreferenceVersion)
class PreferenceVersionAdmin(RoleAdminMixin, admin.ModelAdmin):
    list_display = [
        "label",
        "world",
        "extends",
        "row_count",
        "picks_added",
        "short_sha256",
        "file_link",
        "created_by_name",
        "created_at",
    ]
    list_filter = ["world", "is_mixed"]
    list_select_related = ["world", "extends"]
    search_fields = ["sha256", "created_by_name"]
    readonly_fields = [
        "world",
        "is_mixed",
        "number",
        "extends",
        "row_count",
        "picks_added",
        "sha256",
        "size_bytes",
        "file_path",
        "created_by",
        "created_by_name",
        "created_at",
    ]

    # A version never changes: no adding, editing or deleting here.
    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="sha256")
    def short_sha256(self, version: PreferenceVersion) -> str:
        return version.sha256[:12]

    @admin.display(description="File")
    def file_link(self, version: PreferenceVersion) -> str:
        return format_html(
            '<a href="{}">{}</a>',
            version.download_url,
            version.file_path.rsplit("/", 1)[-1] or "—",
        )


@admin.register(JudgeConnection)
class JudgeConnectionAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = MANAGER
    change_role = MANAGER
    list_display = ["world", "endpoint_url", "lora_adapter", "api_key_env", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        # Set under Environment → Judge, where the address and the key variable are checked.
        return [field.name for field in JudgeConnection._meta.fields]

    def has_add_permission(self, request, *args) -> bool:
        return False
