"""Workspace admin of the policy registry: versions and endpoints — the operators' control panel.

The version list shows what the Policies page shows (live badge, lineage, what it learned
from, its last evaluation, its endpoint and cards, "did not learn") and offers the page's
operations as actions: Make live, Serve on N cards, Release, Runs on, Evaluate against the
live version, Start a canary. Every action calls the same service as the page and the API
(policies.live, policies.canary, policies.endpoints, policies.services; Evaluate posts to the
Evaluate page, since evaluation sits above the registry) and needs the owner role. A service's
refusal is an admin message, never an error page. Where a version runs, serving and releasing change
only through those services: the change form shows those fields read-only.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from arena.models import World
from levers9.models import GpuPool
from levers9.providers import ANTHROPIC, OPENAI, SIMULATOR, VLLM
from levers9.roles import OWNER, REVIEWER, RoleAdminMixin
from policies.canary import canary_running, canary_share_from_percent, canary_start
from policies.endpoints import endpoint_delete, endpoint_release, version_release, version_serve
from policies.errors import PolicyError
from policies.live import LiveError, live_version, make_live_warnings, version_make_live
from policies.models import Endpoint, PolicyVersion, ReplyAuthor
from policies.selectors import VersionRow, versions_with_verdicts
from policies.services import JUDGE_MODEL, version_runs_on_set

ACTION_TEMPLATE = "admin/policies/policyversion/action_step.html"


def _each(modeladmin, request, items, operation, done: str) -> None:
    count = 0
    for item in items:
        try:
            operation(item)
        except (PolicyError, LiveError) as error:
            # The item named once: most refusals already begin with it.
            said = str(error) if str(error).startswith(str(item)) else f"{item}: {error}"
            modeladmin.message_user(request, said, messages.WARNING)
        else:
            count += 1
    if count:
        modeladmin.message_user(request, f"{done}: {count}.", messages.SUCCESS)


# --- what the list shows of each version --------------------------------------------------


class _Panel:
    """Everything the list says about versions, read once per request: the rows of the
    Policies page (policies.selectors, with each version's last verdict as evaluation decides
    it), and each world's live version and running canary."""

    def __init__(self) -> None:
        self.rows: dict[int, VersionRow] = {
            row.version.pk: row for row in versions_with_verdicts(world=None)
        }
        worlds = list(World.objects.order_by("name"))
        self.lives = {world.pk: live_version(world=world) for world in worlds}
        self.canaries = {world.pk: canary_running(world=world) for world in worlds}

    def live_of(self, version: PolicyVersion) -> PolicyVersion | None:
        """The live version of the version's world."""
        return self.lives.get(version.world_id)

    def canary_of(self, version: PolicyVersion) -> Any:
        """The canary running in the version's world, if any."""
        return self.canaries.get(version.world_id)

    def evaluation(self, version: PolicyVersion) -> dict[str, Any] | None:
        """The last evaluation as the Policies page has it: verdict (the simulator's where it
        played the duel; none from a judge at chance), what it rests on, the judge's win
        rate and interval, opponent, judge."""
        row = self.rows.get(version.pk)
        if row is None or not row.evaluation:
            return None
        verdict = row.evaluation
        return {
            "id": verdict.get("evaluation"),
            "words": verdict.get("summary", ""),
            "verdict": verdict.get("label") or verdict.get("verdict") or "even",
            "source": verdict.get("source") or "judge",
            "sentence": verdict.get("sentence") or "",
            "simulator": verdict.get("simulator") or "",
            "lost": bool(verdict.get("lost")),
            "win_rate": verdict.get("win_rate"),
            "interval": verdict.get("interval") or None,
            "against": verdict.get("against") or "",
            "judge": verdict.get("judge") or "",
            "licensed_by": verdict.get("licensed_by") or "",
        }


def _judge_rate(figures: dict[str, Any]) -> str:
    text = f"win rate {figures['win_rate']:.2f}"
    if figures["interval"]:
        low, high = figures["interval"]
        text += f" [{low:.2f}, {high:.2f}]"
    return text


def _evaluation_text(figures: dict[str, Any] | None) -> str:
    """One line, on what the verdict rests: the simulator's won share (the judge's win rate
    beside it), no verdict and why (the judge's raw win rate beside it), or the judge's."""
    if figures is None:
        return "not evaluated"
    if figures["win_rate"] is None:
        return figures["words"]
    if figures["source"] == "simulator":
        text = f"{figures['verdict']} (simulator): {figures['simulator']}"
        judged = f"the judge's {_judge_rate(figures)}"
    elif figures["sentence"]:
        text = figures["sentence"]
        judged = f"the judge's raw {_judge_rate(figures)}"
    else:
        text = f"{figures['verdict']}: {_judge_rate(figures)}"
        judged = ""
    if figures["against"]:
        text += f" vs {figures['against']}"
    if judged:
        text += f"; {judged}"
    if figures["judge"]:
        text += f", judge {figures['judge']}"
    if figures.get("licensed_by"):
        text += f", licensed by its {figures['licensed_by']}"
    return text


def _endpoint_text(endpoint: Endpoint | None) -> str:
    if endpoint is None:
        return "—"
    cards = f"{endpoint.card_count} × {endpoint.card_type} on {endpoint.pool_name}"
    if endpoint.is_live and not endpoint.card_allocation_id:
        cards += " (holds no cards: the CPU pool's)"
    return f"endpoint {endpoint.pk}, {endpoint.get_state_display().lower()}: {cards}"


class LiveFilter(admin.SimpleListFilter):
    title = "live"
    parameter_name = "live"

    def lookups(self, request, model_admin):
        return [("yes", "Live"), ("canary", "Canary candidate"), ("no", "Not live")]

    def queryset(self, request, queryset):
        # Each world has its own live version and canary.
        worlds = list(World.objects.all())
        live_ids = [live.pk for world in worlds if (live := live_version(world=world)) is not None]
        if self.value() == "yes":
            return queryset.filter(pk__in=live_ids)
        if self.value() == "no":
            return queryset.exclude(pk__in=live_ids)
        if self.value() == "canary":
            candidate_ids = [
                canary.candidate_id
                for world in worlds
                if (canary := canary_running(world=world)) is not None
            ]
            return queryset.filter(pk__in=candidate_ids)
        return queryset


class PolicyVersionForm(forms.ModelForm):
    """A version's parent must be of its own world; the field says so when it is not."""

    class Meta:
        model = PolicyVersion
        # Where it runs and what serves it change only through the actions (read-only).
        fields = [
            "world",
            "number",
            "name",
            "parent",
            "description",
            "move_strategy",
            "learned_from",
        ]

    def clean(self):
        cleaned = super().clean()
        parent = cleaned.get("parent")
        world = cleaned.get("world") or (self.instance.world if self.instance.world_id else None)
        if parent is not None and world is not None and parent.world_id != world.pk:
            self.add_error(
                "parent",
                f"{parent.label} belongs to {parent.world.name}, not {world.name}: a parent "
                "must be of the same world.",
            )
        return cleaned


# --- the intermediate forms of the actions ------------------------------------------------


def _pool_choices() -> list[tuple[str, str]]:
    # GPU pools first: serving goes to cards unless someone picks the CPU (as on the page).
    pools = sorted(
        GpuPool.objects.filter(enabled=True).order_by("position", "name"),
        key=lambda pool: pool.is_cpu,
    )
    return [("", "The first enabled GPU pool (else the CPU pool)")] + [
        (pool.name, f"{pool.name}: {pool.card_count} × {pool.card_type}") for pool in pools
    ]


class ServeForm(forms.Form):
    pool = forms.ChoiceField(required=False)
    gpu_count = forms.IntegerField(min_value=1, initial=1, label="Cards")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["pool"].choices = _pool_choices()


class RunsOnForm(forms.Form):
    provider = forms.ChoiceField(
        choices=[
            (SIMULATOR, "Simulator (scripted)"),
            (VLLM, "vLLM endpoint"),
            (OPENAI, "OpenAI"),
            (ANTHROPIC, "Anthropic"),
            (JUDGE_MODEL, "The world's judge model"),
        ]
    )
    model = forms.CharField(required=False)
    endpoint_url = forms.CharField(required=False, label="Endpoint URL")
    lora_adapter = forms.CharField(required=False, label="LoRA adapter")
    api_key_env = forms.CharField(
        required=False,
        label="Key variable",
        help_text="The NAME of the variable holding the endpoint's key (VLLM_API_KEY), "
        "never the key.",
    )
    world = forms.ModelChoiceField(
        queryset=World.objects.order_by("name"),
        required=False,
        to_field_name="slug",
        help_text="Whose judge model, for “the world's judge model” (default: each "
        "version's own world).",
    )


class CanaryForm(forms.Form):
    share_percent = forms.FloatField(
        label="Share of live calls (%)",
        initial=10,
        help_text="The candidate takes this share of live calls; the live version the rest.",
    )


class EvaluateForm(forms.Form):
    # No World field: both versions are of the version's own world, which the action names and
    # posts as a hidden field (offering every world let an operator pick one whose versions
    # these are not).
    seed = forms.IntegerField(min_value=0, initial=0)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(RoleAdminMixin, admin.ModelAdmin):
    view_role = REVIEWER
    change_role = OWNER
    form = PolicyVersionForm
    list_display = [
        "label",
        "world",
        "live_badge",
        "lineage",
        "learned_from_short",
        "last_evaluation",
        "endpoint_and_cards",
        "did_not_learn_mark",
        "provider",
        "status",
        "created_at",
    ]
    # One world's versions at a time: each world has its own numbers, live version, canary.
    list_filter = ["world", "status", "provider", LiveFilter]
    list_select_related = ["parent", "world"]
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
        "live_badge",
        "lineage",
        "learned_from_short",
        "last_evaluation",
        "endpoint_and_cards",
        "did_not_learn_mark",
    ]
    # Every one changes who answers or what holds cards: the owner's (has_change_permission).
    actions = ["make_live", "serve", "release", "runs_on", "evaluate_against_live", "canary"]

    def get_readonly_fields(self, request, obj=None):
        # A version's world and number are what it is: set when it is made, never moved
        # (its lineage, live periods and evaluations are that world's).
        fields = list(super().get_readonly_fields(request, obj))
        return fields + ["world", "number"] if obj is not None else fields

    # --- the columns ------------------------------------------------------------------------

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        panel = _Panel()
        for version in changelist.result_list:  # the page's rows, evaluated once
            version._admin_panel = panel
        return changelist

    @staticmethod
    def _panel(version: PolicyVersion) -> _Panel:
        """The list attaches one panel to its rows; a change page reads its own."""
        panel = getattr(version, "_admin_panel", None)
        if panel is None:
            panel = version._admin_panel = _Panel()
        return panel

    def _row(self, version: PolicyVersion) -> VersionRow | None:
        return self._panel(version).rows.get(version.pk)

    @admin.display(description="Live")
    def live_badge(self, version: PolicyVersion) -> str:
        panel = self._panel(version)
        live, canary = panel.live_of(version), panel.canary_of(version)
        if live is not None and live.pk == version.pk:
            return format_html('<strong style="color:{}">● live</strong>', "#1a7f37")
        if canary is not None and canary.candidate_id == version.pk:
            return format_html(
                '<strong style="color:#9a6700">canary {}</strong>', f"{canary.share:.0%}"
            )
        return "—"

    @admin.display(description="Lineage")
    def lineage(self, version: PolicyVersion) -> str:
        row = self._row(version)
        chain = row.lineage if row else [version]
        return " ← ".join(ancestor.label for ancestor in chain)

    @admin.display(description="Learned from")
    def learned_from_short(self, version: PolicyVersion) -> str:
        row = self._row(version)
        facts = row.facts if row else []
        text = row.summary if row else ""
        text = text or "; ".join(f"{label} {value}" for label, value in facts[:4])
        if not text:
            return version.learned.kind or "—"
        return text if len(text) <= 160 else text[:159] + "…"

    @admin.display(description="Last evaluation")
    def last_evaluation(self, version: PolicyVersion) -> str:
        figures = self._panel(version).evaluation(version)
        text = _evaluation_text(figures)
        if figures is None:
            return text
        colour = "#cf222e" if figures["lost"] else "inherit"
        return format_html(
            '<span style="color:{}" title="{}">{}</span>', colour, figures["words"], text
        )

    @admin.display(description="Endpoint and cards")
    def endpoint_and_cards(self, version: PolicyVersion) -> str:
        row = self._row(version)
        endpoint = row.endpoint if row else None
        if endpoint is None:
            return "—"
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:policies_endpoint_change", args=[endpoint.pk]),
            _endpoint_text(endpoint),
        )

    @admin.display(description="Did not learn")
    def did_not_learn_mark(self, version: PolicyVersion) -> str:
        reasons = version.did_not_learn
        if not reasons:
            return "—"
        return format_html(
            '<strong style="color:#cf222e" title="{}">⚠ did not learn</strong>',
            " · ".join(reasons),
        )

    # --- the actions ------------------------------------------------------------------------

    def _step(
        self,
        request,
        queryset,
        *,
        action: str,
        title: str,
        submit: str,
        form: forms.Form | None = None,
        form_url: str = "",
        hidden: dict[str, Any] | None = None,
        details: list[tuple[str, str]] | None = None,
        warnings: list[str] | None = None,
        lead: str = "",
    ) -> TemplateResponse:
        """The intermediate page of an action (as Django's delete confirmation): it posts
        back to the list with the same action and selection, plus `post=yes`."""
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "queryset": queryset,
            "action": action,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "form": form,
            "form_url": form_url,
            "hidden": hidden or {},
            "details": details or [],
            "warnings": warnings or [],
            "lead": lead,
            "submit": submit,
        }
        return TemplateResponse(request, ACTION_TEMPLATE, context)

    def _one(self, request, queryset, what: str) -> PolicyVersion | None:
        if queryset.count() != 1:
            self.message_user(request, f"Choose one version to {what}.", messages.WARNING)
            return None
        return queryset.get()

    @staticmethod
    def _confirmed(request) -> bool:
        return request.POST.get("post") == "yes"

    @admin.action(description="Make live…", permissions=["change"])
    def make_live(self, request, queryset):
        version = self._one(request, queryset, "make live")
        if version is None:
            return None
        if self._confirmed(request):
            try:
                version_make_live(version=version, by=request.user)
            except LiveError as error:
                self.message_user(request, str(error), messages.ERROR)
            else:
                self.message_user(request, f"{version.label} is live.", messages.SUCCESS)
            return None
        panel = self._panel(version)
        figures = panel.evaluation(version)
        live, canary = panel.live_of(version), panel.canary_of(version)
        details = [
            ("World", version.world.name),
            (f"Live now in {version.world.name}", live.label if live else "no version"),
            ("Lineage", self.lineage(version)),
            ("Last evaluation", _evaluation_text(figures)),
        ]
        if figures is not None:
            details += [
                ("Verdict", figures["sentence"] or f"{figures['verdict']} ({figures['source']})"),
                ("Simulator", figures["simulator"] or "—"),
                (
                    "Judge's win rate",
                    "—" if figures["win_rate"] is None else f"{figures['win_rate']:.3f}",
                ),
                (
                    "Interval",
                    "—"
                    if not figures["interval"]
                    else f"[{figures['interval'][0]:.3f}, {figures['interval'][1]:.3f}]",
                ),
                ("Against", figures["against"] or "—"),
                ("Judge version", figures["judge"] or "—"),
                ("In words", figures["words"]),
            ]
        # The same warnings as the Policies page's Make live (policies.live).
        row = panel.rows.get(version.pk)
        warnings = make_live_warnings(
            version=version, evaluation=row.evaluation if row else None, canary=canary
        )
        return self._step(
            request,
            queryset,
            action="make_live",
            title=f"Make {version.label} live?",
            submit=f"Yes, make {version.label} live",
            details=details,
            warnings=warnings,
            lead=f"{version.world.name}'s live calls go to this version from now on. The "
            "numbers, not the button, decide: a version that lost is not refused.",
        )

    @admin.action(description="Serve on N cards…", permissions=["change"])
    def serve(self, request, queryset):
        form = ServeForm(request.POST if self._confirmed(request) else None)
        if form.is_bound and form.is_valid():
            _each(
                self,
                request,
                queryset,
                lambda version: version_serve(
                    version=version,
                    gpu_count=form.cleaned_data["gpu_count"],
                    pool_name=form.cleaned_data["pool"],
                    started_by=request.user,
                ),
                "Serve jobs started",
            )
            return None
        return self._step(
            request,
            queryset,
            action="serve",
            title="Serve on N cards",
            submit="Serve",
            form=form,
            lead="A serve job per version waits in the pool's line for its cards; the "
            "endpoint is starting until it answers.",
        )

    @admin.action(
        description="Release the endpoint (cards back to the pool, weights kept)",
        permissions=["change"],
    )
    def release(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda version: version_release(version=version),
            "Released",
        )

    @admin.action(description="Runs on…", permissions=["change"])
    def runs_on(self, request, queryset):
        form = RunsOnForm(request.POST if self._confirmed(request) else None)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            # Each version runs on its own world's judge unless a world is named.
            _each(
                self,
                request,
                queryset,
                lambda version: version_runs_on_set(
                    version=version,
                    provider=data["provider"],
                    model=data["model"],
                    endpoint_url=data["endpoint_url"],
                    lora_adapter=data["lora_adapter"],
                    api_key_env=data["api_key_env"],
                    world=(data["world"] or version.world)
                    if data["provider"] == JUDGE_MODEL
                    else None,
                ),
                "Moved",
            )
            return None
        return self._step(
            request,
            queryset,
            action="runs_on",
            title="Where the agent runs",
            submit="Move",
            form=form,
            lead="Only names, addresses and a key variable's NAME are recorded; keys stay in "
            "the dashboard pod's environment.",
        )

    @admin.action(description="Evaluate against the live version…", permissions=["change"])
    def evaluate_against_live(self, request, queryset):
        version = self._one(request, queryset, "evaluate")
        if version is None:
            return None
        live = live_version(world=version.world)
        if live is None or live.pk == version.pk:
            self.message_user(
                request,
                f"{version.label} is the live version: choose another to evaluate against it.",
                messages.WARNING,
            )
            return None
        # Evaluation sits above the registry: the form posts to the Evaluate page, which
        # starts it with evaluation_start, as the page's own form does.
        return self._step(
            request,
            queryset,
            action="evaluate_against_live",
            title=f"Evaluate {version.label} against {live.label} (live)",
            submit="Start the evaluation",
            # Both versions are of one world: its calls are the ones they answer, and it is
            # the only world offered.
            form=EvaluateForm(),
            form_url=reverse("evaluate"),
            hidden={"world": version.world.slug, "candidate": version.pk, "baseline": live.pk},
            details=[("World", version.world.name)],
            lead="Both versions answer the same held-out calls of the world; the judge scores "
            "every answer. It runs as a job on the CPU pool.",
        )

    @admin.action(description="Start a canary…", permissions=["change"])
    def canary(self, request, queryset):
        version = self._one(request, queryset, "start a canary with")
        if version is None:
            return None
        form = CanaryForm(request.POST if self._confirmed(request) else None)
        if form.is_bound and form.is_valid():
            try:
                share = canary_share_from_percent(form.cleaned_data["share_percent"])
                canary_start(candidate=version, share=share, by=request.user)
            except LiveError as error:
                self.message_user(request, str(error), messages.ERROR)
            else:
                self.message_user(
                    request, f"{version.label} takes {share:.0%} of live calls.", messages.SUCCESS
                )
            return None
        live = live_version(world=version.world)
        return self._step(
            request,
            queryset,
            action="canary",
            title=f"Start a canary: {version.label}",
            submit="Start the canary",
            form=form,
            details=[
                ("World", version.world.name),
                (f"Live now in {version.world.name}", live.label if live else "no version"),
            ],
            lead="A share of live calls goes to the candidate while the live version takes "
            "the rest; promote or roll back on the Release page.",
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

    @admin.action(
        description="Release (cards back to the pool, weights kept)", permissions=["change"]
    )
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


@admin.register(ReplyAuthor)
class ReplyAuthorAdmin(RoleAdminMixin, admin.ModelAdmin):
    """Which version wrote which reply (the arena's Reply admin lists the replies themselves):
    written by the Duel and by evaluations, never by hand."""

    list_display = ["reply", "version", "untrained_base", "reply_source"]
    list_filter = ["version__world", "version", "untrained_base"]
    search_fields = ["reply__text"]
    list_select_related = ["reply", "version"]
    raw_id_fields = ["reply"]

    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Source")
    def reply_source(self, author: ReplyAuthor) -> str:
        if author.untrained_base:
            # The base's words in a checkpoint against it: never the trained version's.
            return f"{author.version.base_model} untrained (base of {author.version.label})"
        return author.reply.get_source_display()
