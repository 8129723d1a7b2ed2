"""Following jobs from the dashboard, adopting the ones nobody follows, and resuming by hand.

A training outlives the dashboard that started it: the worker runs the trainer, and every
dashboard looks at the workspace's unfinished jobs now and then (levers9.jobs.watcher). A job
whose dashboard is gone is marked interrupted with the task it carries on as, then adopted: the
new dashboard waits for the task, reads its result and finishes the job exactly as the first
would have (levers9.jobs.services.job_finish). Resume does the same by hand, and may name the
task, accepted only for a task of that trainer, in the job's own workspace, started after the
job was created.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from levers9.jobs.kinds import watcher_hooks
from levers9.jobs.models import Job
from levers9.jobs.processes import process_alive, this_process
from levers9.jobs.progress import job_event_send
from levers9.jobs.services import (
    JOB_TASK,
    JobError,
    job_finish,
    job_has_ended,
    job_note,
    job_place,
    orphan_trainer_kill,
)
from levers9.pools import cards_release
from levers9.task_results import (
    TaskResultMissing,
    UnsafeTaskResult,
    plain_value_from_column,
    task_result_read,
)

# A dashboard that has not looked at its jobs for this long is gone; another adopts them.
WATCHER_TIMEOUT = timedelta(seconds=30)
# A worker that has not beaten for this long (and is not on this host to ask) is gone.
WORKER_TIMEOUT = timedelta(minutes=3)


def _task_finished(task_id: str) -> bool:
    if not task_id:
        return False
    try:
        task_result_read(task_id)
    except TaskResultMissing:
        return False
    except UnsafeTaskResult:
        return True  # finished, and job_finish will say the result was refused
    return True


def jobs_follow(*, watcher: str | None = None) -> list[int]:
    """One look at this workspace's unfinished jobs, as the dashboard `watcher`.

    Adopts jobs nobody follows any more (marking them interrupted first, with the task they
    carry on as), finishes the ones whose task has ended, and fails the ones whose worker
    died. Returns the ids it finished.
    """
    watcher = watcher or this_process()
    now = timezone.now()
    finished: list[int] = []
    jobs = Job.objects.filter(state__in=[*Job.ACTIVE_STATES, Job.State.INTERRUPTED]).exclude(
        state=Job.State.FINISHING
    )
    # Oldest first: a job finished in this look frees cards for the ones queued after it.
    for job in jobs.order_by("id"):
        if job.watcher != watcher and not process_alive(
            job.watcher, job.watched_at, WATCHER_TIMEOUT
        ):
            job = _adopt(job, watcher)
            if job is None:
                continue
        if job.watcher != watcher:
            continue  # another live dashboard follows it
        Job.objects.filter(pk=job.pk).update(watched_at=now)
        if job.state == Job.State.PACKING:
            job_place(job_id=job.pk)
            continue
        if _task_finished(job.task_id):
            if job_finish(job_id=job.pk):
                finished.append(job.pk)
            continue
        if (
            job.state in (Job.State.RUNNING, Job.State.INTERRUPTED)
            and job.worker
            and not process_alive(job.worker, job.heartbeat_at, WORKER_TIMEOUT)
        ):
            _fail_lost_worker(job)
    # What the apps keep in step with the jobs (endpoints whose row was deleted, ...).
    for hook in watcher_hooks():
        hook()
    return finished


def _adopt(job: Job, watcher: str) -> Job | None:
    """Take over a job whose dashboard is gone (or that nobody followed yet)."""
    packed = job.card_allocation_id is not None
    if job.state == Job.State.PACKING and not packed:
        # It died before its spec and card request were in place: it never reached the
        # platform, so there is nothing to adopt.
        if job.created_at < timezone.now() - WATCHER_TIMEOUT or job.watcher:
            Job.objects.filter(pk=job.pk, state=Job.State.PACKING).update(
                state=Job.State.INTERRUPTED,
                error="Interrupted while packing, before it reached the platform: "
                "start it again from Train.",
            )
            job_event_send(job.pk)
        return None
    if job.state == Job.State.INTERRUPTED and not job.task_id:
        return None  # only Resume with a task id can help this one
    taken = Job.objects.filter(pk=job.pk, watcher=job.watcher, state=job.state).update(
        watcher=watcher, watched_at=timezone.now()
    )
    if not taken:
        return None
    if job.watcher and job.state in (Job.State.SUBMITTED, Job.State.RUNNING):
        # The dashboard that followed it restarted (or died): the record says so.
        Job.objects.filter(pk=job.pk).update(state=Job.State.INTERRUPTED)
        job_note(
            job.pk,
            f"Interrupted: the dashboard following it ({job.watcher}) went away; it carries "
            f"on as task {job.task_id}.",
        )
        job_event_send(job.pk)
    if job.watcher or job.state == Job.State.INTERRUPTED:
        job_note(job.pk, f"Adopted by the dashboard {watcher}.")
    return Job.objects.get(pk=job.pk)


def _fail_lost_worker(job: Job) -> None:
    if _task_finished(job.task_id):
        return
    failed = Job.objects.filter(
        pk=job.pk, state__in=[Job.State.RUNNING, Job.State.INTERRUPTED], finish_claimed_at=None
    ).update(
        state=Job.State.FAILED,
        finished_at=timezone.now(),
        error=f"The worker running this job ({job.worker}) stopped before the trainer "
        "finished; its cards were freed. Start it again from Train.",
    )
    if failed:
        cards_release(allocation_id=job.card_allocation_id)
        orphan_trainer_kill(job)
        job_has_ended(job.pk)


# --- resume (by hand) -------------------------------------------------------------------


def job_resume(*, job: Job, task_id: str = "") -> Job:
    """Adopt an interrupted job by hand, optionally naming the task it carries on as."""
    if job.state != Job.State.INTERRUPTED:
        raise JobError(
            f"Job {job.pk} is {job.get_state_display().lower()}; only an "
            "interrupted job can be resumed."
        )
    if not job.task_id and not task_id:
        raise JobError(
            "This job was interrupted while packing, before it reached the "
            "platform: start it again from Train."
        )
    if task_id and task_id != job.task_id:
        _check_task_belongs(job, task_id)
        Job.objects.filter(pk=job.pk).update(task_id=task_id)
    job_note(job.pk, f"Resumed by hand as task {task_id or job.task_id}.")
    Job.objects.filter(pk=job.pk, state=Job.State.INTERRUPTED).update(
        state=Job.State.RUNNING, watcher=this_process(), watched_at=timezone.now(), error=""
    )
    job.refresh_from_db()
    if _task_finished(job.task_id):
        job_finish(job_id=job.pk)
    else:
        # A dashboard's watcher (or the next Resume) finishes it when the task ends.
        Job.objects.filter(pk=job.pk).update(watcher="")
    job.refresh_from_db()
    job_event_send(job.pk)
    return job


def _check_task_belongs(job: Job, task_id: str) -> None:
    """A named task must be this trainer's, in this job's workspace, started after the job."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT func, args, started FROM public.django_q_task WHERE id = %s OR name = %s",
            [task_id, task_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise JobError(f"No finished task '{task_id}' exists; resume once it has finished.")
    func, raw_args, started = row
    try:
        arguments = plain_value_from_column(raw_args) if raw_args else []
    except UnsafeTaskResult as error:
        raise JobError(f"Task '{task_id}' cannot be read safely ({error}).") from error
    if func != "levers9.tasks.run_in_workspace" or len(arguments) < 4 or arguments[1] != JOB_TASK:
        raise JobError(f"Task '{task_id}' is not a training task.")
    if arguments[0] != job.workspace_schema:
        raise JobError(f"Task '{task_id}' belongs to another workspace.")
    if arguments[3] != job.trainer:
        raise JobError(f"Task '{task_id}' ran {arguments[3]}, not this job's {job.trainer}.")
    if started is None or started < job.created_at:
        raise JobError(f"Task '{task_id}' started before this job was created.")
