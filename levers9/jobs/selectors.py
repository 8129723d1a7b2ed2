"""Reads of the job platform."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from levers9.jobs.kinds import jobs_about
from levers9.jobs.models import Job

LOG_TAIL_BYTES = 20_000


def job_list_recent(limit: int = 30) -> list[Job]:
    """The newest jobs, each with what it is about."""
    return jobs_about_read(list(Job.objects.select_related("started_by")[:limit]))


def jobs_about_read(jobs: list[Job]) -> list[Job]:
    """Read what each job is about in one go per kind (a page of jobs shows it), instead of
    one query per job when each `job.about` is first used."""
    about = jobs_about(jobs)
    for job in jobs:
        job.about = about[job.pk]
    return jobs


def job_log_tail(job: Job, *, max_bytes: int = LOG_TAIL_BYTES) -> str:
    """The end of the trainer's log (all of it for small logs), with no server paths."""
    if not job.spec_path:
        return ""
    path = Path(job.spec_path).parent / "log.txt"
    if not path.exists():
        return ""
    with path.open("rb") as log:
        log.seek(0, 2)
        size = log.tell()
        log.seek(max(size - max_bytes, 0))
        return without_server_paths(log.read().decode("utf-8", errors="replace"))


def without_server_paths(text: str) -> str:
    """Text for a page, with the server's folders said by name: where the volumes and the code
    live on the server is nobody's business on a page (a trainer's error names its files)."""
    folders = {
        str(settings.DATASETS_DIR): "datasets",
        str(settings.MODELS_DIR): "models",
        str(settings.BASE_DIR): ".",
    }
    # Longest first: the volumes usually live inside the code's folder.
    for folder in sorted(folders, key=len, reverse=True):
        if len(folder) > 1:
            text = text.replace(folder, folders[folder])
    return text


def job_durations_recent(
    *, trainer: str, pool_name: str = "", matches=None, limit: int = 5
) -> list[float]:
    """How long this workspace's last finished runs of a trainer ran, in seconds (newest first):
    what a new run's estimate reads. `matches(job)` keeps only the runs like the new one."""
    done = Job.objects.filter(
        trainer=trainer, state=Job.State.DONE, started_at__isnull=False, finished_at__isnull=False
    )
    if pool_name:
        done = done.filter(pool_name=pool_name)
    durations: list[float] = []
    for job in done.order_by("-finished_at")[: limit * 4]:
        if matches is not None and not matches(job):
            continue
        durations.append((job.finished_at - job.started_at).total_seconds())
        if len(durations) == limit:
            break
    return durations
