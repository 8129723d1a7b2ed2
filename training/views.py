"""Train pages: the cards, the jobs with live progress, one job with its log."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from arena.models import World
from arena.selectors import world_in_view
from levers9.jobs.adoption import job_resume
from levers9.jobs.models import Job
from levers9.jobs.progress import job_payload
from levers9.jobs.selectors import (
    job_list_recent,
    job_log_tail,
    jobs_about_read,
    without_server_paths,
)
from levers9.jobs.services import JobError, job_cancel
from levers9.roles import MANAGER, role_required
from policies.models import PolicyVersion
from policies.selectors import policies_answering, policy_live
from trainers.judge.standing import too_few_or_none
from trainers.registry import DPO, RLHF
from training.cards import train_move_strategy
from training.runs import training_run_of


@role_required(MANAGER)
def train(request):
    from arena.selectors import preference_versions
    from levers9.models import GpuPool
    from trainers.wording.spec import MIN_PAIRS
    from training.wording import bases_offered

    jobs = list(job_list_recent())
    pools = list(GpuPool.objects.filter(enabled=True))
    world = world_in_view(request)
    return render(
        request,
        "training/train.html",
        {
            "page": "train",
            "jobs": jobs,
            "job_payloads": [job_payload(job) for job in jobs],
            # The world in view's versions: a new version is made in that world.
            "versions": policies_answering(world=world) if world else [],
            "live": policy_live(world=world) if world else None,
            # Its own frozen versions only: training in a world reads no other world's picks.
            "preference_versions": preference_versions(world)[:20] if world else [],
            "pools": pools,
            "default_pool": next((p for p in pools if not p.is_cpu), pools[0] if pools else None),
            "bases": bases_offered(),
            "min_pairs": MIN_PAIRS,
            "learned": _how_each_method_learns(),
            "offline_moves": _offline_move_card(world_in_view(request)),
        },
    )


def _offline_move_card(world: World | None) -> dict | None:
    """What the move-strategy card says on a world with no simulator: the learner, the calls
    it learns from and is measured on, and its last version's measurement."""
    if world is None or world.has_simulator:
        return None
    from training.offline import OFFLINE_ALGORITHM, OFFLINE_LEARNER

    job = (
        Job.objects.filter(
            trainer=OFFLINE_ALGORITHM, training_run__world=world, state=Job.State.DONE
        )
        .select_related("training_run__produced_version")
        .order_by("-id")
        .first()
    )
    version = job.training_run.produced_version if job else None
    return {
        "learner": OFFLINE_LEARNER,
        "training_calls": world.calls.filter(held_out=False).count(),
        "held_out_calls": world.calls.filter(held_out=True).count(),
        "version": version,
        "record": version.learned if version else None,
    }


def _checkpoint_of(version, *, against=None) -> dict | None:
    """The version's newest finished checkpoint on the held-out calls: against its parent, or
    against `against` (an RLHF version against the DPO version of the same picks), with the
    win rate's interval and the judge that scored it, as measured on held-out data."""
    if version is None:
        return None
    # Through the version's reverse relation: training does not import evaluation.
    checkpoints = version.evaluations_as_candidate.filter(purpose="checkpoint", state="done")
    baseline_id = against.pk if against is not None else version.parent_id
    checkpoint = (
        checkpoints.filter(baseline_id=baseline_id).select_related("baseline").order_by("-id")
    ).first()
    if checkpoint is None:
        return None
    summary = checkpoint.summary or {}
    simulator = summary.get("simulator") or {}
    # The verdict as evaluation decides it everywhere: the simulator's where it played, none
    # from a judge at chance (its sentence says why; the win rate is then the judge's raw one).
    decided = checkpoint.verdict_decided
    return {
        "win_rate": checkpoint.win_rate,
        "ci": summary.get("ci"),
        "verdict": decided.outcome,
        "verdict_label": decided.label,
        "no_verdict": decided.sentence,
        # The judge's figure that licensed the verdict, as Evaluate says it ("" when none).
        "licence": decided.licence_words,
        "baseline": checkpoint.baseline.label,
        "id": checkpoint.pk,
        "judge": checkpoint.judge_model,
        # How far that judge is to be believed: its held-out agreement (or "not measured").
        "judge_agreement": checkpoint.judge_agreement,
        # On a simulated world the verdict is the simulator's: say what it rests on.
        "simulated": simulator if "won_share_difference" in simulator else None,
    }


def _reward_model_too_few(record: dict) -> str | None:
    """The version's held-out figure counts its held-out calls (an outcome AUC) or pairs (an
    accuracy): under the 30 the rule asks, it says "too few to measure (n = 6)" instead."""
    if record.get("held_out_auc") is not None:
        return too_few_or_none((record.get("outcome_examples") or {}).get("held_out_calls"))
    if record.get("held_out_accuracy") is not None:
        return too_few_or_none((record.get("pairs") or {}).get("held_out"))
    return None


def _how_each_method_learns() -> dict:
    """The world's own numbers under "How each method learns": the latest RLHF and DPO, each
    with its checkpoint on the held-out calls (the DPO one is the number RLHF must beat)."""
    latest = {}
    for method in (RLHF, DPO):
        job = Job.objects.filter(trainer=method, state=Job.State.DONE).order_by("-id").first()
        if job and job.result:
            produced = training_run_of(job).produced_version
            record = job.result.get("version") or {}
            metrics = job.result.get("metrics") or {}
            latest[method] = {
                "job": job,
                "pairs": record.get("pairs"),
                "held_out_accuracy": record.get("held_out_accuracy"),
                "held_out_auc": record.get("held_out_auc"),
                "held_out_too_few": _reward_model_too_few(record),
                "reward_source": record.get("reward_source"),
                "outcome_examples": record.get("outcome_examples"),
                "kl": metrics.get("kl"),
                "reward_before": metrics.get("reward_before"),
                "reward_after": metrics.get("reward_after"),
                # DPO: how the served version's own log-probabilities rank the held-out
                # pairs, against the base's on the same pairs.
                "policy_held_out_accuracy": metrics.get("policy_held_out_accuracy"),
                "base_held_out_accuracy": metrics.get("base_held_out_accuracy"),
                "policy_gain_over_base_ci": metrics.get("policy_gain_over_base_ci"),
                "policy_unchanged": _includes_zero(metrics.get("policy_gain_over_base_ci")),
                # The version's own marks (its trainer's, and against its base untrained).
                "did_not_learn": produced.did_not_learn
                if produced is not None
                else metrics.get("did_not_learn") or [],
                "version": produced,
                "checkpoint": _checkpoint_of(produced),
                # The independent measure: it against its base untrained, by the world's judge.
                "against_base": _against_base_of(produced),
            }
    rlhf = latest.get(RLHF)
    if rlhf and rlhf["version"] is not None:
        # The head-to-head the description asks for: RLHF against DPO of the same picks.
        benchmark = _dpo_benchmark_of(rlhf["version"])
        rlhf["against_dpo"] = (
            _checkpoint_of(rlhf["version"], against=benchmark) if benchmark else None
        )
        rlhf["dpo_benchmark"] = benchmark
    return latest


def _against_base_of(version) -> dict | None:
    """What the version's record keeps of its checkpoint against its own base untrained
    (evaluation writes it once that checkpoint is done); None before or for no version."""
    if version is None:
        return None
    return getattr(version.learned, "against_base", None)


def _includes_zero(bounds) -> bool:
    return bool(bounds) and bounds[0] <= 0 <= bounds[1]


def _dpo_benchmark_of(version):
    """The DPO version an RLHF version was (or will be) checkpointed against, if any."""
    baseline_ids = version.evaluations_as_candidate.filter(purpose="checkpoint").values_list(
        "baseline_id", flat=True
    )
    return PolicyVersion.objects.filter(pk__in=baseline_ids, algorithm=DPO).order_by("-pk").first()


@require_POST
@role_required(MANAGER)
def train_move_strategy_view(request):
    world = world_in_view(request, first_if_none=False)
    world = world or World.objects.filter(scenarios__isnull=False).first()
    # The world's own versions only: a parent from another world is refused, not swapped.
    versions = {str(version.pk): version for version in policies_answering(world=world)}
    chosen_parent = request.POST.get("parent", "")
    if chosen_parent and chosen_parent not in versions:
        messages.error(request, f"parent: choose one of {world.name}'s versions that answer.")
        return redirect("train")
    parent = versions.get(chosen_parent) or policy_live(world=world)
    try:
        seed = int(request.POST.get("seed") or 0)
    except ValueError:
        messages.error(request, "The seed must be a whole number.")
        return redirect("train")
    if world is None or parent is None:
        messages.error(request, "There is no world or version to start from.")
        return redirect("train")
    try:
        job = train_move_strategy(world=world, parent=parent, seed=seed, started_by=request.user)
    except ValueError as error:
        messages.error(request, str(error))
        return redirect("train")
    messages.success(request, f"Started job {job.pk}: move strategy from {parent.label}.")
    return redirect("train")


@role_required(MANAGER)
def job_detail(request, job_id: int):
    job = get_object_or_404(Job, pk=job_id)
    job.error = without_server_paths(job.error)  # shown, never saved
    return render(
        request,
        "training/job_detail.html",
        {"page": "train", "job": job, "payload": job_payload(job), "log": job_log_tail(job)},
    )


@require_POST
@role_required(MANAGER)
def job_action(request, job_id: int, action: str):
    job = get_object_or_404(Job, pk=job_id)
    try:
        if action == "cancel":
            job_cancel(job=job)
            messages.success(request, f"Job {job.pk} cancelled; its cards are free.")
        else:
            job = job_resume(job=job, task_id=request.POST.get("task_id", "").strip())
            messages.success(request, f"Job {job.pk} resumed: {job.get_state_display()}.")
    except JobError as error:
        messages.error(request, str(error))
    # A Cancel in a jobs table goes back to that table; elsewhere to the job's page.
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(back)
    return redirect("job-detail", job_id=job.pk)


# --- Engines ---------------------------------------------------------------------------


def _form_knobs(post, algorithm: str) -> dict:
    """Knob values from the form as JSON numbers; blank fields keep the defaults."""
    from training.engines import engines_knob_help

    knobs = {}
    for row in engines_knob_help(algorithm):
        raw = post.get(f"knob_{row['name']}", "").strip()
        if raw == "":
            continue
        if row["type"] == "bool":
            knobs[row["name"]] = raw in {"1", "true", "on", "yes"}
            continue
        try:
            number = float(raw)
        except ValueError:
            knobs[row["name"]] = raw  # the validator names the knob and what it takes
            continue
        knobs[row["name"]] = int(number) if row["type"] == "int" and number.is_integer() else number
    return knobs


@role_required(MANAGER)
def engines(request):
    """The world in view's Engines: the routes it can run (and why the others cannot), and
    its own runs. A run starts in that world, never in another that has a simulator."""
    from training.engines import (
        KnobError,
        engines_knob_help,
        engines_routes,
        engines_run_start,
        engines_runs_of,
    )

    world = world_in_view(request)
    routes = engines_routes(world=world) if world else []
    runnable = [route.name for route in routes if not route.refused]
    known = {route.name for route in routes}
    chosen = request.POST.get("algorithm") or request.GET.get("algorithm") or ""
    if chosen not in known:
        chosen = runnable[0] if runnable else ""
    versions = policies_answering(world=world) if world else []
    live = policy_live(world=world) if world else None
    error, error_knob = "", ""
    if request.method == "POST":
        posted = request.POST.get("algorithm", "")
        by_pk = {str(version.pk): version for version in versions}
        parent = by_pk.get(request.POST.get("parent", "")) or live
        if world is None:
            error, error_knob = "Make a world first: Engines runs in a world.", "world"
        elif parent is None:
            error, error_knob = f"{world.name} has no version to start from.", "parent"
        else:
            try:
                job = engines_run_start(
                    algorithm=posted,
                    knobs=_form_knobs(request.POST, posted) if posted in known else {},
                    world=world,
                    parent=parent,
                    started_by=request.user,
                )
            except KnobError as problem:
                error, error_knob = str(problem), getattr(problem, "knob", "") or ""
            else:
                messages.success(request, f"Engines run {job.pk} started: {job.title}.")
                return redirect("engines-run", job_id=job.pk)
    return render(
        request,
        "training/engines.html",
        {
            "page": "engines",
            "world": world,
            "routes": [
                {**vars(route), "knobs": engines_knob_help(route.name)}
                for route in routes
                if not route.refused
            ],
            "refused_routes": [route for route in routes if route.refused],
            "chosen": chosen,
            "posted": request.POST,
            "error": error,
            "error_knob": error_knob,
            "runs": jobs_about_read(engines_runs_of(world=world)) if world else [],
            "versions": versions,
            "live": live,
        },
        status=400 if error else 200,
    )


@role_required(MANAGER)
def engines_run(request, job_id: int):
    """One run, in its own world: the header follows the run's world, so its page never reads
    as another world's."""
    from django.urls import reverse

    from training.engines import (
        engines_run_against_parent,
        engines_run_held_out,
        engines_run_offline_comparison,
    )

    job = get_object_or_404(
        Job.objects.select_related(
            "training_run__world", "training_run__parent_version", "training_run__produced_version"
        ),
        pk=job_id,
        kind="engines",
    )
    world = training_run_of(job).world
    in_view = world_in_view(request)
    if world is not None and (in_view is None or in_view.pk != world.pk):
        return redirect(f"{reverse('engines-run', args=[job.pk])}?world={world.slug}")
    comparison = engines_run_offline_comparison(job=job, world=world)
    return render(
        request,
        "training/engines_run.html",
        {
            "page": "engines",
            "job": job,
            "world": world,
            "payload": job_payload(job),
            "result": job.result or {},
            "comparison": comparison,
            "held_out": engines_run_held_out(job=job),
            "standing": engines_run_against_parent(job=job),
            "charts": {
                "curve": (job.result or {}).get("learning_curve") or [],
                "scenarios": [
                    {
                        key: row.get(key)
                        for key in ("slug", "optimal_return", "learned_return", "parent_return")
                    }
                    for row in (job.result or {}).get("scenarios") or []
                ],
                "comparison": comparison,
            },
        },
    )


@require_POST
@role_required(MANAGER)
def engines_run_promote_view(request, job_id: int):
    """Promote in the run's world (the form names it); a run that did worse than its parent
    only with the confirm box ticked."""
    from training.engines import KnobError, engines_run_promote

    job = get_object_or_404(Job, pk=job_id, kind="engines")
    try:
        version = engines_run_promote(
            job=job,
            world=world_in_view(request, first_if_none=False),
            confirm=request.POST.get("confirm", "") in {"1", "true", "on", "yes"},
            promoted_by=request.user,
        )
    except (JobError, KnobError) as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Promoted to {version.label} of {version.world.name}.")
    return redirect("engines-run", job_id=job.pk)


@require_POST
@role_required(MANAGER)
def train_wording_view(request):
    from arena.models import PreferenceVersion
    from training.estimates import wording_estimate
    from training.wording import (
        WordingCardError,
        train_wording,
        wording_choice_check,
        wording_choice_from,
    )

    world = world_in_view(request)
    preference = PreferenceVersion.objects.filter(
        pk=request.POST.get("preference") or 0, world=world
    ).first()
    parent = (
        {str(v.pk): v for v in policies_answering(world=world)}.get(request.POST.get("parent", ""))
        if world
        else None
    )
    try:
        choice = wording_choice_from(
            method=request.POST.get("method", ""),
            preference=preference,
            pool_name=request.POST.get("pool") or "",
            parent=parent,
            cards=request.POST.get("cards"),
            epochs=request.POST.get("epochs"),
            seed=request.POST.get("seed"),
            base=request.POST.get("base") or "",
            reward_source=request.POST.get("reward_source") or "",
            world=world,
        )
        wording_choice_check(choice)
        # A long job says how long and asks once: the page answers with the estimate and a
        # Confirm that posts the same form again with confirm=1 (no script, no dialog).
        estimate = wording_estimate(choice)
        if estimate.needs_confirming and request.POST.get("confirm") != "1":
            return _confirm_page(request, choice=choice, estimate=estimate)
        job = train_wording(choice=choice, started_by=request.user)
    except (WordingCardError, ValueError) as error:
        messages.error(request, str(error))
        return redirect("train")
    messages.success(request, f"Started job {job.pk}: {job.title}.")
    return redirect("train")


# The Train form's fields a Confirm posts again, as they were typed.
_WORDING_FIELDS = (
    "method",
    "preference",
    "pool",
    "parent",
    "cards",
    "epochs",
    "seed",
    "base",
    "reward_source",
)


def _confirm_page(request, *, choice, estimate):
    from training.wording import METHODS

    return render(
        request,
        "training/confirm_start.html",
        {
            "page": "train",
            "what": METHODS.get(choice.method, choice.method),
            "choice": choice,
            "estimate": estimate,
            "fields": [
                (name, request.POST[name]) for name in _WORDING_FIELDS if name in request.POST
            ],
            "action": request.get_full_path(),
        },
    )
