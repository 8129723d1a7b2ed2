"""The job lifecycle on the platform: start, place on cards, finish exactly once, cancel.
Following jobs from the dashboard, adopting them and resuming by hand are levers9.jobs.adoption's.

packing → submitted(task_id) → running → finishing → done | failed, plus interrupted and
cancelled. The worker runs the trainer (levers9.jobs.runner); the dashboard follows the job
and finishes it (levers9.jobs.watcher) — so a dashboard restart never stops a training, and the
finish (the job kind's: register, serve, checkpoint) is claimed with a conditional update and
runs once. What a kind's finish does is the registering app's (levers9.jobs.kinds).
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from levers9.jobs.estimates import job_expected_seconds
from levers9.jobs.kinds import job_kind, produced_listeners, trainer_lookup
from levers9.jobs.limits import job_limits_check
from levers9.jobs.models import Job
from levers9.jobs.processes import orphan_trainer_stop
from levers9.jobs.progress import job_event_send
from levers9.models import GpuPool
from levers9.pools import (
    BACKGROUND_JOB,
    JOB_HOLDERS,
    LANES,
    PERSON_JOB,
    SHORT_JOB,
    SHORT_JOB_SECONDS,
    cards_queue_standing,
    cards_release,
    cards_request,
    cards_serving_order,
    cards_try_grant,
)
from levers9.task_results import (
    UnsafeTaskResult,
    task_result_read,
)
from levers9.tasks import enqueue_in_workspace

logger = logging.getLogger(__name__)

JOB_TASK = "levers9.jobs.runner.job_run"
# job_start's expected_seconds when its caller leaves it out: read this workspace's past runs.
FROM_PAST_RUNS = object()


def failure_sentence(failure: Any) -> str:
    """The one line of a task's failure a user can act on: the exception's own words (the last
    line of a traceback), never the traceback with its paths and SQL."""
    lines = [line.strip() for line in str(failure or "").splitlines() if line.strip()]
    frames = ("Traceback", "File ", "^", "~")
    sentence = next((line for line in reversed(lines) if not line.startswith(frames)), "")
    sentence = sentence or "it stopped without saying why"
    if len(sentence) > 300:
        sentence = sentence[:297] + "..."
    return f"{sentence} (the full report is in the server log)."


def job_note(job_id: int, line: str) -> None:
    """Add a line to what happened to the job along the way."""
    stamp = timezone.now().strftime("%Y-%m-%d %H:%M:%S")
    Job.objects.filter(pk=job_id).update(notes=Concat(F("notes"), Value(f"{stamp} {line}\n")))


class JobError(ValueError):
    """A request about a job that cannot be honoured; the message says why."""


def job_folder(job: Job) -> Path:
    return Path(settings.DATASETS_DIR) / job.workspace_schema / "jobs" / str(job.pk)


# --- start -------------------------------------------------------------------------------


def job_start(
    *,
    kind: str,
    trainer: str,
    spec: dict[str, Any],
    pool: GpuPool,
    card_count: int = 1,
    title: str = "",
    started_by=None,
    finish_needs: dict[str, Any] | None = None,
    within_workspace_limits: bool = True,
    background: bool = False,
    expected_seconds: float | None | object = FROM_PAST_RUNS,
) -> Job:
    """Pack the spec onto the datasets volume, ask for cards, and queue one task on the pool.

    Refused with JobLimitReached when the workspace already has its limit of jobs waiting;
    follow-ups the platform starts itself (a checkpoint of a finished training) pass
    `within_workspace_limits=False`: refusing them would fail the job that asked for them.
    `background` is work nobody clicked (a refit after a freeze): it waits in the pool's
    background lane and yields to jobs a person started (levers9.pools); it is never refused
    by the workspace's limits, which count what people start.

    `expected_seconds` is what the caller expects the job to take (None: not known); left out,
    it is this workspace's past runs of the trainer on the pool (levers9.jobs.estimates). Work
    expected within SHORT_JOB_SECONDS asks in the pool's short lane (levers9.pools), so it
    starts at once whatever long jobs hold the pool.

    What the job is about (its world, its parent version) is the caller's to keep, in its own
    app's table: inside an atomic block around this call, the task is queued only once that
    row is there too.
    """
    try:
        trainer_lookup(trainer)
        job_kind(kind)
    except LookupError as error:
        raise JobError(str(error)) from None
    # One transaction: a refused or failed start leaves no half-packed job behind, and the
    # limit's row lock is held until the new job's card request is there to be counted.
    with transaction.atomic():
        if within_workspace_limits and not background:
            job_limits_check()
        job = Job.objects.create(
            kind=kind,
            trainer=trainer,
            title=title[:200],
            workspace_schema=connection.schema_name,
            started_by=started_by,
            pool_name=pool.name,
            card_type=pool.card_type,
            card_count=card_count,
            finish_needs=finish_needs or {},
            watcher="",
            background=background,
        )
        folder = job_folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps({**spec, "job": job.pk}, indent=2, sort_keys=True))
        expected = (
            job_expected_seconds(trainer=trainer, pool_name=pool.name)
            if expected_seconds is FROM_PAST_RUNS
            else expected_seconds
        )
        allocation = cards_request(
            pool=pool,
            holder_kind=_holder_kind(pool, expected=expected, background=background),
            holder_id=job.pk,
            card_count=card_count,
            label=f"{connection.schema_name} job {job.pk} ({trainer})",
            expected_seconds=expected,
        )
        Job.objects.filter(pk=job.pk).update(
            spec_path=str(spec_path), card_allocation_id=allocation.pk
        )
        transaction.on_commit(lambda: job_place(job_id=job.pk))
    job.refresh_from_db()
    return job


def _holder_kind(pool: GpuPool, *, expected: float | None, background: bool) -> str:
    """Which lane the job asks in: short work (whoever started it) where the pool has lanes,
    else work nobody clicked, else a person's job."""
    if pool.is_cpu and expected is not None and expected <= SHORT_JOB_SECONDS:
        return SHORT_JOB
    return BACKGROUND_JOB if background else PERSON_JOB


def job_place(*, job_id: int) -> bool:
    """Queue the job's task once its cards are granted; until then it waits in line and says
    how many requests are ahead. True once submitted."""
    job = Job.objects.get(pk=job_id)
    if job.state != Job.State.PACKING or job.card_allocation_id is None:
        return job.state != Job.State.PACKING
    if not cards_try_grant(allocation_id=job.card_allocation_id):
        _job_waiting_say(job)
        return False
    # The cards are held, and every placement racing this one sees them held too: claim the
    # queueing with a conditional update so exactly one of them queues the task.
    now = timezone.now()
    claimed = Job.objects.filter(
        pk=job.pk, state=Job.State.PACKING, submitted_at=None, task_id=""
    ).update(submitted_at=now)
    if claimed != 1:
        return True  # another placement queues it (or already has)
    pool = GpuPool.objects.get(name=job.pool_name)
    try:
        task_id = enqueue_in_workspace(
            JOB_TASK, job.pk, job.trainer, cluster=pool.cluster_name, task_name=f"job-{job.pk}"
        )
    except Exception:
        # Not queued after all: let the next placement (the watcher's look) try again.
        Job.objects.filter(pk=job.pk, task_id="").update(submitted_at=None)
        raise
    # With Redis the worker may take the task before this line runs: the task id is written
    # whatever the state, and the worker starts a job it finds still packing (jobs.runner).
    Job.objects.filter(pk=job.pk).update(task_id=task_id, submitted_at=now)
    Job.objects.filter(pk=job.pk, state=Job.State.PACKING).update(
        state=Job.State.SUBMITTED, metrics={}
    )
    job_event_send(job.pk)
    return True


def _job_waiting_say(job: Job) -> None:
    """Tell the job (and its watchers) where it stands in the line and why it waits."""
    standing = cards_queue_standing(allocation_id=job.card_allocation_id)
    waiting = {"waiting_for_cards": standing.ahead, "waiting_why": standing.sentence()}
    if job.metrics != waiting:
        Job.objects.filter(pk=job.pk).update(metrics=waiting)
        job_event_send(job.pk)


def pool_place_next(*, pool_id: int) -> None:
    """Place the jobs next in a pool's line (the line cards_try_grant serves), in whichever
    workspace they are, for as long as the freed cards take them: on a CPU pool each lane
    (people's, short, background: levers9.pools), elsewhere the one line."""
    pool = GpuPool.objects.get(pk=pool_id)
    for lane in LANES if pool.is_cpu else (None,):
        _lane_place_next(pool_id=pool_id, lane=lane)


def _lane_place_next(*, pool_id: int, lane: str | None) -> None:
    from django_tenants.utils import schema_context

    tried: set[int] = set()
    while True:
        head = next(
            (
                in_line.allocation
                for in_line in cards_serving_order(pool_id=pool_id)
                if in_line.allocation.holder_kind in JOB_HOLDERS
                and not in_line.held_back
                and lane in (None, in_line.lane)
            ),
            None,
        )
        if head is None or head.pk in tried:
            return
        tried.add(head.pk)
        with schema_context(head.workspace.schema_name):
            packing = Job.objects.filter(pk=head.holder_id, state=Job.State.PACKING).exists()
            if not packing or not job_place(job_id=head.holder_id):
                return


# --- finish, exactly once --------------------------------------------------------------


def job_finish(*, job_id: int) -> bool:
    """Read the task's result and finish the job. Runs once, however often it is called."""
    claimed = Job.objects.filter(
        pk=job_id,
        finish_claimed_at=None,
        state__in=[Job.State.SUBMITTED, Job.State.RUNNING, Job.State.INTERRUPTED],
    ).update(state=Job.State.FINISHING, finish_claimed_at=timezone.now())
    if claimed != 1:
        return False
    job = Job.objects.get(pk=job_id)
    try:
        success, result = task_result_read(job.task_id)
    except UnsafeTaskResult as error:
        return _job_end(job, Job.State.FAILED, error=f"The task's result was refused: {error}.")
    if not success:
        # The traceback is for operators (the server log); the job says what went wrong.
        logger.error("Job %s (%s) failed:\n%s", job.pk, job.trainer, result)
        return _job_end(
            job, Job.State.FAILED, error=f"The trainer failed: {failure_sentence(result)}"
        )
    if isinstance(result, dict) and result.get("cancelled"):
        return _job_end(job, Job.State.CANCELLED)
    try:
        with transaction.atomic():
            _finish_for_kind(job, result)
    except Exception as error:  # the finish's own failure is the job's, said in words
        return _job_end(job, Job.State.FAILED, error=f"The finish failed: {error}", result=result)
    return _job_end(job, Job.State.DONE, result=result)


def _finish_for_kind(job: Job, result: Any) -> None:
    """The registered kind's finish (which keeps what it produced where its app keeps the
    job's links), then everyone listening for versions a job produced."""
    if not isinstance(result, dict):
        raise ValueError("the trainer's result is not a dict of plain values")
    kind = job_kind(job.kind)
    produced = kind.finish(job, result) if kind.finish else None
    if produced is not None:
        job_produced(job, produced)


def job_produced(job: Job, version: Any) -> None:
    """Tell the listeners (the checkpoint) that `job` produced `version`: called by the finish,
    and by whoever makes a version from a job's result later (promoting an Engines run)."""
    for listener in produced_listeners():
        listener(job, version)


def _job_end(job: Job, state: str, *, error: str = "", result=None) -> bool:
    Job.objects.filter(pk=job.pk).update(
        state=state, error=error, result=result, finished_at=timezone.now()
    )
    cards_release(allocation_id=job.card_allocation_id)
    job_has_ended(job.pk)
    return state == Job.State.DONE


def job_has_ended(job_id: int) -> None:
    """The job has ended (done, failed or cancelled): its kind's end hook, then the event."""
    job = Job.objects.get(pk=job_id)
    with contextlib.suppress(LookupError):
        kind = job_kind(job.kind)
        if kind.on_end is not None:
            kind.on_end(job)
    job_event_send(job.pk)


# --- cancel ----------------------------------------------------------------------------


def job_cancel(*, job: Job) -> Job:
    cancelled = Job.objects.filter(
        pk=job.pk,
        state__in=[
            Job.State.PACKING,
            Job.State.SUBMITTED,
            Job.State.RUNNING,
            Job.State.INTERRUPTED,
        ],
    ).update(state=Job.State.CANCELLED, finished_at=timezone.now(), error="Cancelled.")
    if not cancelled:
        raise JobError(
            f"Job {job.pk} is {job.state}; only a job that has not ended can be cancelled."
        )
    # The worker sees the state within seconds and stops the trainer; free the cards now.
    cards_release(allocation_id=job.card_allocation_id)
    orphan_trainer_kill(job)
    job_has_ended(job.pk)
    job.refresh_from_db()
    return job


def orphan_trainer_kill(job: Job) -> None:
    """If the trainer runs on this host and its worker is gone, nobody else will stop it
    (levers9.jobs.processes.orphan_trainer_stop: on its own host, and only while that pid
    still runs this job's spec)."""
    orphan_trainer_stop(worker=job.worker, trainer_pid=job.trainer_pid, spec_path=job.spec_path)
