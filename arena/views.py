"""Arena pages: the Duel (compare, approve, freeze), real calls, the World page (what describes
a world's business: name, description, the agent's prompt, its moves, its reasons and rubric;
and new worlds),
Environment → Judge (each world's judge and the rubric), and the mission pages later work
fills in."""

from __future__ import annotations

import csv
import io
import re

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.core.validators import validate_slug
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from arena.agents import agents
from arena.errors import DuelError, JudgeFitError
from arena.judge.agreement import (
    judge_agreement,
    judge_measure_start,
    judge_measurement_latest,
)
from arena.judge.fit_job import judge_fit_start
from arena.judge.versions import judge_version_latest
from arena.judge.world_dimensions import world_dimensions
from arena.models import Call, JudgeConnection, Pick, World
from arena.moves import (
    MAX_MOVES,
    MIN_MOVES,
    MovesInvalid,
    move_label,
    moves_as_text,
    moves_from_text,
)
from arena.preference_format import spreadsheet_cell
from arena.selectors import (
    QUEUE_ORDERS,
    PickFilters,
    QueueSelection,
    duel_item,
    duel_stats,
    pick_filter_choices,
    picks_listed,
    picks_reviewer_counts,
    policy_versions_numbered,
    preference_versions,
    world_customer_label,
    world_in_view,
    world_map,
    world_only,
)
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_jobs_active, duel_pairs_request
from arena.services.queue import duel_next
from arena.services.worlds import (
    MAX_DIMENSIONS,
    MIN_DIMENSIONS,
    WorldBadInput,
    world_create,
    world_update,
)
from levers9.jobs.progress import job_payloads
from levers9.providers import provider_choices
from levers9.roles import MANAGER, OWNER, REVIEWER, has_role, role_required
from trainers.judge.standing import (
    MIN_HELD_OUT_ITEMS,
    measure_items,
    pairs_text,
    report_rows,
    scorer_text,
)


@role_required(REVIEWER)
def call_list(request):
    calls = Call.objects.select_related("world").order_by("world__name", "external_id")
    world = request.GET.get("world")
    if world:
        calls = calls.filter(world__slug=world)
    outcome = request.GET.get("outcome")
    if outcome in {"won", "lost", "unknown"}:
        calls = calls.filter(outcome=outcome)
    page = Paginator(calls, 50).get_page(request.GET.get("page"))
    return render(request, "arena/call_list.html", {"page_obj": page, "outcome": outcome})


@role_required(REVIEWER)
def call_detail(request, call_id: int):
    call = get_object_or_404(Call.objects.select_related("world"), pk=call_id)
    return render(request, "arena/call_detail.html", {"call": call, "turns": call.turns.all()})


# --- the Duel ---------------------------------------------------------------------------------

KEYS = [
    ("A or ←", "A is better"),
    ("B or →", "B is better"),
    ("1–7", "tick a reason"),
    ("T / X", "a tie / both bad"),
    ("S", "skip"),
    ("N or Enter", "next pair, after the pick"),
    ("U", "undo my last pick (until it is frozen)"),
]


@role_required(REVIEWER)
def duel(request):
    world = world_in_view(request)
    context = {"page": "duel", "keys": KEYS}
    if world is None:
        return render(request, "arena/duel.html", context)
    try:
        selection = QueueSelection.from_params(request.GET, world=world)
    except DuelError as error:
        messages.error(request, str(error))
        selection = QueueSelection()
    try:
        pair = duel_next(world=world, reviewer=request.user, selection=selection)
    except DuelError as error:  # e.g. the world's model judge cannot score right now
        messages.error(request, str(error))
        pair = None
    context.update(
        {
            "item": duel_item(pair) if pair else None,
            **_duel_reasons(world, context["keys"]),
            "versions": preference_versions(world)[:10],
            "answering": agents().answering(world=world),
            "can_freeze": has_role(request.user, MANAGER),
        }
    )
    context.update(_duel_panel_context(request, world, selection))
    # Pairs a job is writing (a model answers, or the judge reads with a base): their progress
    # shows under "More pairs", live over the websocket (static/jobs.js).
    pairs_jobs = list(duel_pairs_jobs_active(world))
    context.update({"pairs_jobs": pairs_jobs, "pairs_job_payloads": job_payloads(pairs_jobs)})
    return render(request, "arena/duel.html", context)


def _duel_reasons(world: World, keys: list[tuple[str, str]]) -> dict:
    """The world's own reason tags (its rubric's dimensions), keys 1 to 9 on the first nine,
    and the dimensions the reveal shows the judge's scores on."""
    rubric = world_dimensions(world)
    reason_keys = f"1–{min(9, len(rubric))}"
    return {
        "reasons": [
            {
                "key": number if number <= 9 else "",
                "name": dimension.name,
                "label": dimension.label,
                "help": dimension.help,
            }
            for number, dimension in enumerate(rubric, start=1)
        ],
        "dimensions": [(dimension.name, dimension.label) for dimension in rubric],
        "keys": [(reason_keys if what == "tick a reason" else key, what) for key, what in keys],
    }


def _duel_panel_context(request, world: World, selection: QueueSelection) -> dict:
    """The Duel's side panel: the queue's figures and the world's map, for this selection."""
    stats = duel_stats(world, reviewer=request.user)
    stats["judge_agreement"] = judge_agreement(world)
    return {
        "duel_world": world,
        "selection": selection,
        "selection_params": selection.as_params(),
        "panel_query": urlencode({"world": world.slug, **selection.as_params()}),
        "stats": stats,
        "map": world_map(world, selection=selection),
        "scenarios": world.scenarios.order_by("name"),
        "queue_orders": list(QUEUE_ORDERS.items()),
    }


@role_required(REVIEWER)
def duel_panel(request):
    """The Duel's side panel alone: the page fetches it again after each pick and as a pairs
    job writes pairs (static/duel_panel.js), so the open pairs, the picks and the map's counts
    keep up without a reload."""
    world = world_in_view(request)
    if world is None:
        raise Http404("This workspace has no world yet.")
    try:
        selection = QueueSelection.from_params(request.GET, world=world)
    except DuelError:  # the page said so when it loaded; the panel shows everything
        selection = QueueSelection()
    return render(request, "arena/_duel_panel.html", _duel_panel_context(request, world, selection))


@require_POST
@role_required(MANAGER)
def duel_freeze(request):
    """Freeze the picks of the world in view (the form names it) into its next version."""
    world = world_in_view(request, first_if_none=False) or world_only()
    if world is None:
        messages.error(request, "Choose the world whose picks to freeze (the header's world).")
        return redirect(reverse("duel") + "#freeze")
    try:
        version = preference_freeze(world=world, by=request.user)
    except DuelError as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request,
            f"Froze {world.name} {version.label}: {version.picks_added} new picks, "
            f"{version.row_count} in all.",
        )
    return redirect(reverse("duel") + "#freeze")


@require_POST
@role_required(REVIEWER)
def duel_generate(request):
    """The Duel's "Make pairs": pairs for the world the form names (its hidden `world`),
    between the versions chosen or the default two, then back to that world's Duel. Where
    they are slow (a model answers, or the judge reads with a base: seconds a reply) none is
    written while the browser waits: a job writes them all and the Duel shows its progress."""
    world = world_in_view(request)
    scenario = request.POST.get("scenario") or ""
    params = {"world": world.slug if world else "", "scenario": scenario}
    back = reverse("duel") + "?" + urlencode({key: value for key, value in params.items() if value})
    if world is None:
        messages.error(request, "This workspace has no world yet: make one on the World page.")
        return redirect(back)
    try:
        count = int(request.POST.get("count") or 20)
    except ValueError:
        messages.error(request, "How many: give a whole number of pairs, 1 to 200.")
        return redirect(back)
    try:
        numbers = [int(number) for number in request.POST.getlist("versions") if number]
    except ValueError:
        messages.error(request, "Compare: choose versions from the list.")
        return redirect(back)
    try:
        versions = policy_versions_numbered(numbers=numbers, world=world) if numbers else None
        requested = duel_pairs_request(
            world=world,
            count=min(max(count, 1), 200),
            versions=versions,
            scenario=scenario or None,
            now=0,
            started_by=request.user,
            on_request=True,
        )
    except (DuelError, ValueError) as error:
        messages.error(request, f"No pairs made: {error}")
        return redirect(back)
    chosen = " (from " + ", ".join(version.label for version in versions) + ")" if versions else ""
    if requested.job is not None:
        messages.success(
            request,
            f"Making {requested.later} pairs for the {world.name} queue{chosen} in the "
            f"background (job {requested.job.pk}; a model answers or the judge reads each "
            "reply, seconds a pair): its progress shows under More pairs, and the pairs join "
            "the queue as they come. Go on reviewing meanwhile.",
        )
    else:
        messages.success(request, f"{requested.made} new pairs in the {world.name} queue{chosen}.")
    return redirect(back)


# --- the World page ---------------------------------------------------------------------------


@role_required(REVIEWER)
def world_page(request):
    """What describes the world in view; managers edit it and make new worlds, reviewers read."""
    return _world_page_render(request, world_in_view(request))


# The World page's two forms, by field: what each shows when a refusal re-renders the page.
_SETTINGS_FIELDS = ("name", "description", "system_prompt", "moves")
_NEW_WORLD_FIELDS = ("slug", "name", "description", "system_prompt", "moves")


def _typed(request, fields: tuple[str, ...]) -> dict[str, str]:
    return {field: request.POST.get(field, "") for field in fields}


# The rubric form's columns: one input of each per dimension row (a row with no name is left
# out), and the blank rows offered for new dimensions.
_RUBRIC_COLUMNS = ("name", "label", "help", "weight")
_RUBRIC_BLANK_ROWS = 2


def _rubric_typed(request) -> list[dict[str, str]]:
    columns = {column: request.POST.getlist(f"dimension_{column}") for column in _RUBRIC_COLUMNS}
    rows = max(len(values) for values in columns.values())
    return [
        {column: values[i] if i < len(values) else "" for column, values in columns.items()}
        for i in range(rows)
    ]


def _rubric_rows(world: World, typed: list[dict[str, str]] | None) -> list[dict[str, str]]:
    """The rubric form's rows: as typed after a refusal, else the world's rubric; then blank
    rows for new dimensions, up to the most a world may have."""
    rows = typed
    if rows is None:
        rows = [
            {"name": d.name, "label": d.label, "help": d.help, "weight": f"{d.weight:g}"}
            for d in world_dimensions(world)
        ]
    rows = [row for row in rows if any(value.strip() for value in row.values())]
    blanks = max(0, min(_RUBRIC_BLANK_ROWS, MAX_DIMENSIONS - len(rows)))
    return rows + [dict.fromkeys(_RUBRIC_COLUMNS, "") for _ in range(blanks)]


def _world_page_render(
    request,
    world: World | None,
    *,
    typed_settings: dict[str, str] | None = None,
    typed_new: dict[str, str] | None = None,
    typed_rubric: list[dict[str, str]] | None = None,
):
    """The World page; after a refused form, that form shows what was typed (the refusal
    is in the page's messages), never an empty form or the saved values."""
    can_edit = has_role(request.user, MANAGER)
    context = {"page": "world", "can_edit": can_edit, "min_moves": MIN_MOVES}
    context["max_moves"] = MAX_MOVES
    if world is not None:
        context.update(
            {
                "shown": world,
                "customer": world_customer_label(world),
                "moves": [
                    {**move, "label": move_label(move["name"])}
                    for move in world.moves
                    if isinstance(move, dict)
                ],
                "settings_form": typed_settings
                or {
                    "name": world.name,
                    "description": world.description,
                    "system_prompt": world.system_prompt,
                    "moves": moves_as_text(world.moves),
                },
                "rubric": world_dimensions(world),
                "rubric_form": _rubric_rows(world, typed_rubric),
                "min_dimensions": MIN_DIMENSIONS,
                "max_dimensions": MAX_DIMENSIONS,
            }
        )
    context["new_world"] = typed_new or {}
    return render(request, "arena/world.html", context)


def _world_page(world: World | None) -> str:
    return reverse("world") + (f"?world={world.slug}" if world else "")


@require_POST
@role_required(MANAGER)
def world_settings_save(request, slug: str):
    """The World page's form: name, description, the agent's system prompt and the moves
    (one "name: description" a line), all checked before any is saved."""
    world = get_object_or_404(World, slug=slug)
    try:
        world = world_update(
            world=world,
            name=request.POST.get("name", world.name),
            description=request.POST.get("description", ""),
            system_prompt=request.POST.get("system_prompt", ""),
            moves=moves_from_text(request.POST.get("moves", "")),
        )
    except (MovesInvalid, WorldBadInput) as error:
        what = "Moves not saved" if isinstance(error, MovesInvalid) else "Not saved"
        messages.error(request, f"{what}: {error}")
        return _world_page_render(request, world, typed_settings=_typed(request, _SETTINGS_FIELDS))
    messages.success(request, f"{world.name} is saved: its moves, prompt and description.")
    return redirect(_world_page(world))


@require_POST
@role_required(MANAGER)
def world_rubric_save(request, slug: str):
    """The World page's reasons and rubric: one row per dimension (name, label, one-line
    meaning, weight; a row left without a name is dropped), all checked before any is saved.
    The Duel's reason tags, the judge and the radar follow."""
    world = get_object_or_404(World, slug=slug)
    typed = _rubric_typed(request)
    named = [(number, row) for number, row in enumerate(typed, start=1) if row["name"].strip()]
    try:
        world = world_update(
            world=world,
            dimensions=[
                {column: value for column, value in row.items() if value.strip()}
                for _number, row in named
            ],
        )
    except WorldBadInput as error:
        # "dimensions[2].weight" in the service's words is "row 4's weight" on the page.
        rows = [number for number, _row in named]
        said = re.sub(
            r"dimensions\[(\d+)\]\.?(\w*)",
            lambda match: (
                f"row {rows[int(match[1])]}" + (f"'s {match[2]}" if match[2] else "")
                if int(match[1]) < len(rows)
                else match[0]
            ),
            str(error),
        )
        messages.error(request, f"Reasons and rubric not saved: {said}")
        return _world_page_render(request, world, typed_rubric=typed)
    names = ", ".join(dimension.label for dimension in world_dimensions(world))
    messages.success(request, f"{world.name}'s reasons and rubric are saved: {names}.")
    return redirect(_world_page(world) + "#world-rubric")


@require_POST
@role_required(MANAGER)
def world_new(request):
    """A new world with no simulator, for a business's own calls (import them next). A
    refusal shows the World page again with the form as typed."""

    def refused(why: str):
        messages.error(request, why)
        return _world_page_render(
            request, world_in_view(request), typed_new=_typed(request, _NEW_WORLD_FIELDS)
        )

    slug = (request.POST.get("slug") or "").strip().lower()
    try:
        validate_slug(slug)
    except ValidationError:
        return refused("The slug is its address: letters, digits and dashes.")
    if len(slug) > 60:
        return refused("The slug is its address: keep it to 60 characters.")
    if World.objects.filter(slug=slug).exists():
        return refused(f"A world '{slug}' exists already: choose another slug.")
    try:
        text = request.POST.get("moves", "").strip()
        world = world_create(
            slug=slug,
            name=request.POST.get("name", ""),
            description=request.POST.get("description", ""),
            system_prompt=request.POST.get("system_prompt", ""),
            moves=moves_from_text(text) if text else None,
        )
    except (MovesInvalid, WorldBadInput) as error:
        return refused(f"No world made: {error}")
    messages.success(
        request, f"{world.name} is made. Import its calls in the admin or over the API."
    )
    return redirect(_world_page(world))


def _judge_panel(world: World) -> dict:
    """One world's judge on Environment → Judge: its newest fitted version with its held-out
    figures in words (each through trainers.judge.standing: too few items say so), its standing,
    and a model judge's measurement."""
    version = judge_version_latest(world)
    measurement = judge_measurement_latest(world)
    model_shown = None
    if measurement:
        model_shown = {
            "model": pairs_text(measurement.get("model"), with_kappa=False),
            "rubric": pairs_text(measurement.get("rubric"), with_kappa=False),
            "position_consistency": (measurement.get("model") or {}).get("position_consistency"),
        }
    outcomes = ((version.report or {}).get("outcomes") or {}) if version else {}
    enough_calls = measure_items(outcomes.get("fitted"), "outcomes") >= MIN_HELD_OUT_ITEMS
    return {
        "world": world,
        "version": version,
        "standing": version.standing if version else None,
        # The reliability plot is a figure too: none on too few held-out calls.
        "reliability": outcomes.get("reliability") if enough_calls else None,
        "rows": report_rows(version.report) if version else [],
        "scorer": scorer_text(version.report) if version else "",
        "plot_id": f"plot-reliability-{world.slug}",
        "model_judge": world.judge_provider != "rubric",
        "measurement": measurement,
        "measurement_shown": model_shown,
    }


@role_required(MANAGER)
def environment_page(request):
    worlds = list(World.objects.order_by("name"))
    connections = {c.world_id: c for c in JudgeConnection.objects.filter(world__in=worlds)}
    return render(
        request,
        "arena/environment.html",
        {
            "page": "environment",
            # Not "worlds": the header's world selector reads that name (the page frame's
            # context), and these pairs made it an empty box on this page.
            "judge_settings": [(world, connections.get(world.pk)) for world in worlds],
            "choices": {choice.provider: choice for choice in provider_choices()},
            # The rubric of the world in view (each world has its own: the World page).
            "dimensions": [
                (dimension.name, dimension.label, dimension.help)
                for dimension in world_dimensions(world_in_view(request))
            ],
            "agreement": [_judge_panel(world) for world in worlds],
            "min_held_out": MIN_HELD_OUT_ITEMS,
            "can_fit": has_role(request.user, MANAGER),
            # Where a judge's model runs (an address the server calls, a key it reads) is an
            # owner's setting, as Runs on is; managers see it.
            "can_set_judge": has_role(request.user, OWNER),
        },
    )


@require_POST
@role_required(MANAGER)
def world_judge_measure(request, slug: str):
    """Environment → Judge's "Measure": a world's model judge on its held-out picks (a job)."""
    world = get_object_or_404(World, slug=slug)
    try:
        job = judge_measure_start(world=world, started_by=request.user)
    except JudgeFitError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Measuring the model judge of {world.name}: job {job.pk}.")
    return redirect("environment")


@require_POST
@role_required(MANAGER)
def world_judge_fit(request, slug: str):
    """Environment → Judge's "Fit now": the world's judge fitted on what it has (a job)."""
    world = get_object_or_404(World, slug=slug)
    try:
        job = judge_fit_start(world=world, started_by=request.user)
    except JudgeFitError as error:
        messages.error(request, str(error))
    else:
        if job.joined:
            messages.info(
                request,
                f"A fit of the judge of {world.name} is already on its way (job {job.pk}): it "
                "is followed instead of reading the same replies twice, and it refits by "
                "itself on anything it did not read.",
            )
        else:
            messages.success(request, f"Fitting the judge of {world.name}: job {job.pk}.")
    return redirect("environment")


# --- Picks: every pick of a world, filtered, with each reviewer's counts ---------------------

PICKS_PER_PAGE = 50
PICKS_CSV_COLUMNS = (
    "pick_id",
    "pack",
    "picked_at",
    "reviewer",
    "kind",
    "chosen_side",
    "chosen_source",
    "rejected_source",
    "reasons",
    "note",
    "frozen_in",
)


@role_required(REVIEWER)
def picks_page(request):
    """The Picks page: the world in view's picks filtered by reviewer, reason, kind and date,
    newest first, a page at a time, with each reviewer's counts (picks, ties, both bad, notes)
    in the filtered set; ?download=csv gives the filtered picks as CSV."""
    world = world_in_view(request)
    context: dict = {"page": "picks", "picks_world": world}
    if world is None:
        return render(request, "arena/picks.html", context)
    try:
        filters = PickFilters.from_params(request.GET, world=world)
    except DuelError as error:
        messages.error(request, str(error))
        filters = PickFilters(world=world)
    picks = picks_listed(filters)
    if request.GET.get("download") == "csv":
        return _picks_csv(picks, world)
    page = Paginator(picks, PICKS_PER_PAGE).get_page(request.GET.get("page"))
    query = {"world": world.slug, **filters.as_params()}
    context.update(
        {
            "filters": filters,
            "picks": page,
            "reviewer_counts": picks_reviewer_counts(picks),
            "choices": pick_filter_choices(world),
            "kinds": Pick.Kind.choices,
            "worlds": World.objects.order_by("name"),
            "query": urlencode(query),
            "csv_query": urlencode({**query, "download": "csv"}),
        }
    )
    return render(request, "arena/picks.html", context)


def _picks_csv(picks, world: World) -> StreamingHttpResponse:
    """The filtered picks as CSV, every cell made inert for a spreadsheet (a reviewer's name
    or note that starts like a formula is shown, never run)."""

    def lines():
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(PICKS_CSV_COLUMNS)
        for pick in picks.iterator(chunk_size=2000):
            writer.writerow(
                spreadsheet_cell(str(value))
                for value in (
                    pick.pk,
                    pick.world.slug,
                    pick.created_at.isoformat(),
                    pick.reviewer_name,
                    pick.kind,
                    pick.chosen_side,
                    pick.chosen_source,
                    pick.rejected_source,
                    ",".join(pick.reasons or ()),
                    pick.note,
                    pick.frozen_in_number or "",
                )
            )
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
        yield buffer.getvalue()

    response = StreamingHttpResponse(lines(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="picks-{world.slug}.csv"'
    return response
