"""Train pages: the cards, the jobs with live progress, one job with its log."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from arena.models import World
from levers9.roles import MANAGER, role_required
from policies.selectors import policies_answering, policy_live
from training.cards import train_move_strategy
from training.models import Job
from training.progress import job_payload
from training.selectors import job_list_recent, job_log_tail
from training.services import JobError, job_cancel, job_resume


@role_required(MANAGER)
def train(request):
    jobs = list(job_list_recent())
    return render(
        request,
        "training/train.html",
        {
            "page": "train",
            "jobs": jobs,
            "job_payloads": [job_payload(job) for job in jobs],
            "versions": policies_answering(),
            "live": policy_live(),
        },
    )


@require_POST
@role_required(MANAGER)
def train_move_strategy_view(request):
    world = World.objects.filter(slug=request.POST.get("world") or request.session.get("world"))
    world = world.first() or World.objects.filter(scenarios__isnull=False).first()
    versions = {str(version.pk): version for version in policies_answering()}
    parent = versions.get(request.POST.get("parent", "")) or policy_live()
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
    job = get_object_or_404(
        Job.objects.select_related("parent_version", "produced_version"), pk=job_id
    )
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
    return redirect("job-detail", job_id=job.pk)
