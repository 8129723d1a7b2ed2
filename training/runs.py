"""Starting a training job together with what it is about (training.TrainingRun), and what
the platform shows of it (the train and engines kinds' `about`)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from levers9.jobs.kinds import JobAbout
from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from trainers.registry import TRAIN_KIND, Family, trainers_of
from training.models import TrainingRun

# A Train card's move-strategy job names its parent's number where the API shows what its
# finish needs (stored in finish_needs before the run's table kept it).
_PARENT_SHOWN = trainers_of(Family.MOVE_STRATEGY, Family.OFFLINE_MOVES)


def training_run_start(
    *,
    world: Any,
    parent: Any,
    preference_version: int | None = None,
    base_model: str = "",
    **job: Any,
) -> Job:
    """`job_start` (with `job`'s arguments) and the run's row in one transaction: the task is
    queued once the row is there, so the finish always finds the run's world and parent."""
    with transaction.atomic():
        started = job_start(**job)
        TrainingRun.objects.create(
            job=started,
            world=world,
            parent_version=parent,
            preference_version=preference_version,
            base_model=base_model,
        )
    return started


def training_run_of(job: Job) -> TrainingRun:
    """The job's run (a job of another kind has none: an empty one says nothing)."""
    try:
        return job.training_run
    except TrainingRun.DoesNotExist:
        return TrainingRun(job=job)


def training_runs_about(jobs: list[Job]) -> dict[int, JobAbout]:
    runs = TrainingRun.objects.filter(job__in=jobs).select_related(
        "parent_version", "produced_version"
    )
    by_id = {job.pk: job for job in jobs}
    return {
        run.job_id: JobAbout(
            parent_version=run.parent_version,
            produced_version=run.produced_version,
            preference_version=run.preference_version,
            base_model=run.base_model,
            finish_needs=_finish_needs_shown(by_id[run.job_id], run),
        )
        for run in runs
    }


def _finish_needs_shown(job: Job, run: TrainingRun) -> dict[str, Any]:
    shows_parent = job.kind == TRAIN_KIND and job.trainer in _PARENT_SHOWN
    if shows_parent and run.parent_version is not None:
        return {"parent": run.parent_version.number}
    return {}
