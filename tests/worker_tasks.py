"""The django-q task row a worker leaves behind for a job, as the dashboard's finish reads it."""

from __future__ import annotations

import uuid

from django.utils import timezone
from django_q.models import Task

from levers9.jobs.models import Job
from levers9.jobs.services import JOB_TASK


def worker_task_create(
    job: Job, *, result, schema=None, trainer=None, started=None, success=True
) -> str:
    """The task's id; `schema` and `trainer` stand in for the job's own where a test says so."""
    task_id = uuid.uuid4().hex
    Task.objects.create(
        id=task_id,
        name=f"job-{job.pk}",
        func="levers9.tasks.run_in_workspace",
        args=(schema or job.workspace_schema, JOB_TASK, job.pk, trainer or job.trainer),
        kwargs={},
        result=result,
        started=started or timezone.now(),
        stopped=timezone.now(),
        success=success,
        group=schema or job.workspace_schema,
    )
    return task_id


def worker_task_done(job: Job, result) -> None:
    """The job running under a task that has ended with `result`: what a finish then reads."""
    task_id = worker_task_create(job, result=result)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, task_id=task_id)
