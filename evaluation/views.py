"""Evaluate pages (manager role): choose two versions and start, follow the job live, read
the results (the verdict and what it rests on: the simulator's won share and return on a
simulated world, the judge's win rate and its measured agreement; radar, regressions), open a
regression as an episode, and — in a world of real calls — the lead-to-order lens."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode

from arena.models import World
from arena.selectors import world_in_view
from evaluation.against_base import against_base_outcome
from evaluation.episodes import evaluation_episode
from evaluation.errors import EvaluationError
from evaluation.estimates import evaluation_estimate
from evaluation.lens import world_score_vs_outcome
from evaluation.models import Evaluation
from evaluation.selectors import (
    evaluation_latest_done,
    evaluation_versions_default,
    evaluations_recent,
)
from evaluation.services import evaluation_start
from evaluation.summary import (
    evaluation_chart_data,
    evaluation_regressions,
    regression_noise_words,
    regressions_rows,
)
from evaluation.verdict_words import verdict_explained
from levers9.jobs.progress import job_payload, job_payloads
from levers9.roles import MANAGER, role_required
from policies.models import PolicyVersion
from policies.selectors import policies_answering


def _results_context(evaluation: Evaluation | None) -> dict:
    if evaluation is None or evaluation.state != Evaluation.State.DONE:
        return {}
    regressions = evaluation_regressions(evaluation)
    return {
        "results": evaluation.summary,
        "verdict_words": verdict_explained(
            evaluation.summary,
            candidate=evaluation.candidate.label,
            baseline=evaluation.baseline_label,
        ),
        "regressions": regressions_rows(evaluation, regressions),
        # The judge's noise the regressions are beyond, and every call's row with its own.
        "regression_noise": regression_noise_words(regressions["noise"]),
        "per_call": regressions["per_call"],
        "radar": evaluation_chart_data(evaluation),
        # Against its own base: the reasons it did not learn and the notes beside its win rate.
        "against_base": against_base_outcome(evaluation) if evaluation.against_base else None,
    }


def _lens_context(world: World | None, evaluation: Evaluation | None = None) -> dict:
    if world is None or not world.calls.exists():
        return {}
    if evaluation is not None and evaluation.call_set.kind != "real":
        evaluation = None
    return {"lens": world_score_vs_outcome(world=world, evaluation=evaluation)}


@role_required(MANAGER)
def evaluate(request):
    world = world_in_view(request)
    if request.method == "POST":
        return _evaluate_start(request, world)
    candidate, baseline = evaluation_versions_default(world=world) if world else (None, None)
    recent = list(evaluations_recent())
    latest = evaluation_latest_done(world=world) if world else None
    return render(
        request,
        "evaluation/evaluate.html",
        {
            "page": "evaluate",
            "world": world,
            "worlds_to_evaluate": World.objects.order_by("name"),
            # The world in view's versions: both sides of an evaluation are its own.
            "versions": policies_answering(world=world) if world else [],
            "released": PolicyVersion.objects.filter(world=world).exclude(
                status=PolicyVersion.Status.ANSWERING
            ),
            "default_candidate": candidate,
            "default_baseline": baseline,
            "evaluations": recent,
            "job_payloads": job_payloads([e.job for e in recent if e.job_id]),
            "evaluation": latest,
            **_results_context(latest),
            **_lens_context(world, latest),
        },
    )


def _evaluate_page(world: World | None):
    """Back to the Evaluate page of the world the form named, so its lists are that world's."""
    if world is None:
        return redirect("evaluate")
    return redirect(f"{reverse('evaluate')}?{urlencode({'world': world.slug})}")


def _versions_refused(request, world: World | None) -> str:
    """Why the posted versions cannot be evaluated in the posted world, naming the field ("" when
    both are the world's own)."""
    if world is None:
        return "World: choose a world, then two of its versions."
    versions = PolicyVersion.objects.filter(world=world)
    for field, name in (("candidate", "New version"), ("baseline", "Against")):
        posted = request.POST.get(field, "")
        if not posted.isdigit() or not versions.filter(pk=int(posted)).exists():
            return (
                f"{name}: choose one of {world.name}'s versions; each world evaluates its own, "
                "and the lists show the world chosen above."
            )
    return ""


def _evaluate_start(request, world: World | None):
    try:
        seed = int(request.POST.get("seed") or 0)
    except ValueError:
        messages.error(request, "The seed must be a whole number.")
        return _evaluate_page(world)
    refused = _versions_refused(request, world)
    if refused:
        messages.error(request, refused)
        return _evaluate_page(world)
    versions = {str(version.pk): version for version in PolicyVersion.objects.filter(world=world)}
    candidate, baseline = versions[request.POST["candidate"]], versions[request.POST["baseline"]]
    # A long evaluation says how long and asks once: the page answers with the estimate and a
    # Confirm that posts the same form again with confirm=1 (no script, no dialog).
    estimate = evaluation_estimate(world=world, candidate=candidate, baseline=baseline)
    if estimate.needs_confirming and request.POST.get("confirm") != "1":
        return render(
            request,
            "evaluation/confirm_start.html",
            {
                "page": "evaluate",
                "world": world,
                "candidate": candidate,
                "baseline": baseline,
                "estimate": estimate,
                "fields": [
                    (name, request.POST[name])
                    for name in ("candidate", "baseline", "seed", "world")
                    if name in request.POST
                ],
                "action": request.get_full_path(),
            },
        )
    try:
        evaluation = evaluation_start(
            world=world, candidate=candidate, baseline=baseline, seed=seed, started_by=request.user
        )
    except EvaluationError as error:
        messages.error(request, str(error))
        return _evaluate_page(world)
    if evaluation.joined:
        messages.info(
            request,
            f"Evaluation {evaluation.pk} of these versions on the same calls is already on its "
            "way: here it is (nothing new was started).",
        )
    else:
        messages.success(request, f"Started evaluation {evaluation.pk}: {evaluation.title}.")
    return redirect("evaluate-detail", evaluation_id=evaluation.pk)


@role_required(MANAGER)
def evaluation_detail(request, evaluation_id: int):
    evaluation = get_object_or_404(
        Evaluation.objects.select_related("world", "call_set", "candidate", "baseline", "job"),
        pk=evaluation_id,
    )
    return render(
        request,
        "evaluation/detail.html",
        {
            "page": "evaluate",
            "evaluation": evaluation,
            "payload": job_payload(evaluation.job) if evaluation.job_id else None,
            **_results_context(evaluation),
            **_lens_context(evaluation.world, evaluation),
        },
    )


@role_required(MANAGER)
def evaluation_episode_view(request, evaluation_id: int, position: int):
    evaluation = get_object_or_404(
        Evaluation.objects.select_related("world", "call_set", "candidate", "baseline"),
        pk=evaluation_id,
    )
    episode = evaluation_episode(evaluation, position)
    if episode is None:
        raise Http404("No such call in this evaluation.")
    positions = [row["position"] for row in (evaluation.summary or {}).get("per_call", [])]
    regressions = evaluation_regressions(evaluation)["positions"]
    following = [p for p in regressions if p != position]
    return render(
        request,
        "evaluation/episode.html",
        {
            "page": "evaluate",
            "evaluation": evaluation,
            "episode": episode,
            "positions": positions,
            "next_regression": next(
                (p for p in regressions[regressions.index(position) + 1 :]), None
            )
            if position in regressions
            else (following[0] if following else None),
        },
    )
