"""Workspace admin of evaluation: evaluations with their results, and each world's held-out
calls. Results are written by the evaluation job only: the admin shows them read-only and
offers "run again" (a new evaluation of the same versions) as an action."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from evaluation.errors import EvaluationError
from evaluation.estimates import evaluation_estimate
from evaluation.models import Evaluation, EvaluationCallSet, HeldOutCall
from evaluation.services import evaluation_start
from evaluation.summary import evaluation_regressions
from levers9.roles import MANAGER, REVIEWER, RoleAdminMixin, has_role


@admin.register(Evaluation)
class EvaluationAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = REVIEWER
    change_role = MANAGER
    list_display = [
        "id",
        "candidate",
        "baseline_shown",
        "world",
        "purpose",
        "state",
        "win_rate_shown",
        "simulator_shown",
        "verdict_shown",
        "regression_count",
        "created_at",
    ]
    list_filter = ["state", "purpose", "world"]
    search_fields = ["candidate__name", "baseline__name", "error", "judge_model"]
    list_select_related = ["candidate", "baseline", "world"]
    readonly_fields = [f.name for f in Evaluation._meta.fields] + ["results_page"]
    actions = ["run_again"]

    def has_add_permission(self, request, *args) -> bool:
        return False  # evaluations start from Evaluate, the API and the checkpoints

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # what an evaluation found is not edited

    @admin.display(description="Baseline", ordering="baseline")
    def baseline_shown(self, evaluation: Evaluation) -> str:
        # Against its base, the baseline side is the candidate's base untrained, not a version.
        return evaluation.baseline_label

    @admin.display(description="Judge's win rate")
    def win_rate_shown(self, evaluation: Evaluation) -> str:
        summary = evaluation.summary or {}
        if summary.get("win_rate") is None:
            return "—"
        low, high = summary.get("ci") or (None, None)
        return f"{summary['win_rate']:.3f} [{low:.3f}, {high:.3f}]"

    @admin.display(description="Simulator: won share, difference")
    def simulator_shown(self, evaluation: Evaluation) -> str:
        duel = (evaluation.summary or {}).get("simulator") or {}
        if "verdict" not in duel:
            return duel.get("unavailable") or "—"
        low, high = duel["won_share_difference_ci"]
        return (
            f"{duel['candidate']['won_share']:.3f} vs {duel['baseline']['won_share']:.3f}, "
            f"{duel['won_share_difference']:+.3f} [{low:+.3f}, {high:+.3f}]"
        )

    @admin.display(description="Verdict")
    def verdict_shown(self, evaluation: Evaluation) -> str:
        decided = evaluation.verdict_decided
        if not decided.outcome:
            return "—"
        if decided.sentence:
            return decided.sentence
        if decided.licensed_by:
            return f"{decided.label} (judge, licensed by its {decided.licensed_by})"
        return f"{decided.label} ({decided.source})"

    @admin.display(description="Regressions")
    def regression_count(self, evaluation: Evaluation) -> int | str:
        if evaluation.state != Evaluation.State.DONE:
            return "—"
        return len(evaluation_regressions(evaluation)["positions"])

    @admin.display(description="Results")
    def results_page(self, evaluation: Evaluation) -> str:
        url = reverse("evaluate-detail", args=[evaluation.pk])
        return format_html('<a href="{}">Open the results page</a>', url)

    def has_rerun_permission(self, request) -> bool:
        return has_role(request.user, MANAGER)

    @admin.action(
        description="Run the selected evaluations again (same versions, world, seed)",
        permissions=["rerun"],
    )
    def run_again(self, request, queryset) -> TemplateResponse | None:
        evaluations = list(queryset.select_related("world", "candidate", "baseline"))
        estimated = [
            (
                evaluation,
                evaluation_estimate(
                    world=evaluation.world,
                    candidate=evaluation.candidate,
                    baseline=evaluation.baseline,
                ),
            )
            for evaluation in evaluations
        ]
        # As the Evaluate page: a run expected over two minutes says how long and asks once.
        if request.POST.get("post") != "yes" and any(
            estimate.needs_confirming for _, estimate in estimated
        ):
            return TemplateResponse(
                request,
                "admin/evaluation/evaluation/run_again_confirm.html",
                {
                    **self.admin_site.each_context(request),
                    "title": "Run the evaluations again?",
                    "opts": self.model._meta,
                    "estimated": estimated,
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                },
            )
        for evaluation in evaluations:
            try:
                started = evaluation_start(
                    world=evaluation.world,
                    candidate=evaluation.candidate,
                    baseline=evaluation.baseline,
                    seed=evaluation.seed,
                    started_by=request.user,
                    purpose=evaluation.purpose,
                )
            except EvaluationError as error:
                self.message_user(request, f"{evaluation}: {error}", messages.WARNING)
            else:
                said = "Already on its way" if started.joined else "Started"
                self.message_user(request, f"{said}: evaluation {started.pk}: {started.title}.")
        return None


class HeldOutCallInline(admin.TabularInline):
    model = HeldOutCall
    fields = ["position", "call", "scenario", "seed", "outcome", "turns"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Agent turns")
    def turns(self, held: HeldOutCall) -> int:
        return held.moments.count()


@admin.register(EvaluationCallSet)
class EvaluationCallSetAdmin(RoleAdminMixin, admin.ModelAdmin):
    """Chosen once per world and kept, so that evaluations stay comparable: read-only."""

    view_role = REVIEWER
    change_role = MANAGER
    list_display = ["world", "kind", "call_count", "turns_per_call", "created_at"]
    list_filter = ["kind"]
    readonly_fields = ["world", "kind", "turns_per_call", "created_at"]
    inlines = [HeldOutCallInline]

    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # redrawing would make earlier evaluations incomparable

    @admin.display(description="Calls")
    def call_count(self, call_set: EvaluationCallSet) -> int:
        return call_set.calls.count()
