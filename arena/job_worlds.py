"""Starting an arena job (a judge fit, a model judge's measurement, a Duel's pairs) together
with what it is about (arena.models.JobWorld), and what the platform shows of it: those kinds'
`about`, registered in arena.apps. Workspace schema."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from arena.models import JobWorld
from levers9.jobs.kinds import JobAbout
from levers9.jobs.models import Job
from levers9.jobs.services import job_start


def arena_job_start(*, about: JobWorld, **job: Any) -> Job:
    """`job_start` (with `job`'s arguments) and the job's row `about` (not yet saved) in one
    transaction: the task is queued once the row is there, so its work always finds its
    world."""
    with transaction.atomic():
        started = job_start(**job)
        about.job = started
        about.save(force_insert=True)
    return started


def job_world_of(job: Job) -> JobWorld | None:
    """The job's row (None for a job of another kind, or one whose world was deleted)."""
    try:
        return job.arena_world
    except JobWorld.DoesNotExist:
        return None


def job_worlds_about(jobs: list[Job]) -> dict[int, JobAbout]:
    return {
        row.job_id: JobAbout(finish_needs=row.finish_needs_shown)
        for row in JobWorld.objects.filter(job__in=jobs)
    }
