"""The worker side of a job: run the trainer process and stream its progress.

The task is queued only once the job holds its cards (levers9.jobs.services.job_place), so a
worker never sits blocked waiting for cards while jobs behind it could run.

Runs inside the job's workspace (levers9.tasks.run_in_workspace). It never finishes the job:
the dashboard does that (levers9.jobs.watcher), so a job keeps running headless while the
dashboard restarts, and is adopted afterwards. What runs is the job's trainer, as the app that
registered it said (levers9.jobs.kinds): a trainer module in its own process, or a function.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from django_tenants.utils import schema_context

from levers9.jobs.cores import trainer_thread_env
from levers9.jobs.kinds import job_kind, trainer_lookup
from levers9.jobs.models import Job
from levers9.jobs.processes import this_process
from levers9.jobs.progress import job_event_send
from levers9.jobs.trainer_guard import guarded
from levers9.models import CardAllocation
from levers9.pools import SHORT_JOB, cards_release
from trainers.runtime import parse_progress_line

logger = logging.getLogger(__name__)

PROGRESS_WRITE_INTERVAL = 0.5  # seconds between progress writes to the job row
HEARTBEAT_INTERVAL = 2.0
# A background trainer (a judge refit nobody clicked) runs beside a person's job on the same
# cores: one thread, and the scheduler's leftovers, so the person's job keeps its usual pace.
BACKGROUND_NICENESS = 10


class JobCancelled(Exception):
    pass


def _trainer_command(job: Job, spec_path: Path, out_path: Path) -> list[str]:
    module = trainer_lookup(job.trainer).module
    if not module:
        raise ValueError(f"Trainer '{job.trainer}' runs in the worker, not as a process.")
    arguments = ["-m", module, "--spec", str(spec_path), "--out", str(out_path)]
    # A server (vLLM) splits itself across the cards: such kinds say they are not data parallel.
    data_parallel = job_kind(job.kind).data_parallel
    if data_parallel and job.card_count > 1 and job.card_type.lower() != "cpu":
        # Data parallel across the cards: one process per card (torchrun; docs/architecture.md).
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={job.card_count}",
            *arguments,
        ]
    return [sys.executable, *arguments]


def _state(job_id: int) -> str:
    return Job.objects.filter(pk=job_id).values_list("state", flat=True).first() or ""


def job_run(job_id: int, trainer: str) -> dict[str, Any]:
    """The task: returns the trainer's plain-value result (or raises with the reason)."""
    job = Job.objects.get(pk=job_id)
    if job.trainer != trainer:
        raise ValueError(f"Job {job_id} runs {job.trainer}, not {trainer}.")
    if job.state in (*Job.ENDED_STATES, Job.State.FINISHING):
        return {"skipped": f"job was already {job.state}"}
    Job.objects.filter(pk=job_id).update(worker=this_process(), heartbeat_at=timezone.now())
    keep_cards = False
    try:
        # The dashboard queued this task only once the job's cards were granted.
        if not CardAllocation.objects.filter(pk=job.card_allocation_id, state="held").exists():
            raise JobCancelled
        # PACKING too: the dashboard queues the task first and marks the job submitted just
        # after, and a worker on Redis can be quicker than that (the cards are held either way).
        started = Job.objects.filter(
            pk=job_id, state__in=[Job.State.PACKING, Job.State.SUBMITTED, Job.State.INTERRUPTED]
        ).update(state=Job.State.RUNNING, started_at=timezone.now(), metrics={})
        if not started and _state(job_id) != Job.State.RUNNING:
            raise JobCancelled
        job_event_send(job_id)
        if trainer_lookup(job.trainer).in_worker:
            return _run_in_worker(job)
        result = _run_trainer(job)
        # A served version keeps its cards: its endpoint takes them over at the finish and
        # frees them on release (the serve kind says so).
        keep_cards = job_kind(job.kind).keeps_cards
        return result
    except JobCancelled:
        return {"cancelled": True}
    finally:
        # Free the cards the moment the trainer ends and hand them to the next in line,
        # rather than waiting for the dashboard's next look.
        if not keep_cards and cards_release(allocation_id=job.card_allocation_id):
            from levers9.jobs.services import pool_place_next

            pool_place_next(pool_id=CardAllocation.objects.get(pk=job.card_allocation_id).pool_id)


def _run_trainer(job: Job) -> dict[str, Any]:
    folder = Path(job.spec_path).parent
    out_path = folder / "result.json"
    log_path = folder / "log.txt"
    out_path.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(settings.BASE_DIR)}
    short = CardAllocation.objects.filter(pk=job.card_allocation_id, holder_kind=SHORT_JOB)
    in_lane = job.background or short.exists()
    if in_lane or job.card_type.lower() == "cpu":
        # Jobs sharing the CPU pool share the cores this process really has (levers9.jobs.
        # cores): a lane's job beside the slots gets one thread, so the slot's job keeps its
        # share; a slot's job its share of the cores, unless the operator set the threads.
        sizing = trainer_thread_env(
            lane_threads=1 if in_lane else None, slots=settings.LEVERS9_CPU_POOL_SLOTS
        )
        for name, value in sizing.items():
            if in_lane:
                env[name] = value
            else:
                env.setdefault(name, value)
    process = subprocess.Popen(  # noqa: S603 - our interpreter, our module, our files
        # Under a guard that stops the trainer's whole tree if this worker dies: it runs in a
        # session of its own, out of reach of what ends the worker (levers9.jobs.trainer_guard).
        guarded(_trainer_command(job, Path(job.spec_path), out_path), worker_pid=os.getpid()),
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    if job.background:
        # The guard's group, the trainer included whether or not the guard has started it
        # yet: whatever they start later inherits the priority.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PGRP, process.pid, BACKGROUND_NICENESS)
    Job.objects.filter(pk=job.pk).update(trainer_pid=process.pid)
    last_write = last_heartbeat = 0.0
    pending: dict[str, Any] | None = None
    with log_path.open("a") as log:
        while True:
            ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if ready:
                line = process.stdout.readline()
                if line == "":  # end of output: the trainer has exited
                    break
                record = parse_progress_line(line)
                if record and record["levers9"] == "progress":
                    pending = record
                elif not record:
                    log.write(line)
                    log.flush()
            now = time.monotonic()
            if pending and now - last_write >= PROGRESS_WRITE_INTERVAL:
                _write_progress(job.pk, pending)
                # Not the heartbeat's clock: its look at the job's state is how a cancel
                # reaches the trainer, from whichever machine it came.
                pending, last_write = None, now
            if now - last_heartbeat >= HEARTBEAT_INTERVAL:
                last_heartbeat = now
                Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
                if _state(job.pk) == Job.State.CANCELLED:
                    _stop(process)
                    raise JobCancelled
    process.wait()
    if pending:
        _write_progress(job.pk, pending)
    if process.returncode != 0:
        tail = log_path.read_text()[-2000:]
        raise RuntimeError(f"The trainer exited with code {process.returncode}.\n{tail}")
    return json.loads(out_path.read_text())


def _run_in_worker(job: Job) -> dict[str, Any]:
    """Call the job's function here, with the same progress reporting a trainer gets."""
    function = trainer_lookup(job.trainer).function
    last_write = 0.0

    def progress(step: int, total: int, **metrics: Any) -> None:
        nonlocal last_write
        now = time.monotonic()
        if step < total and now - last_write < PROGRESS_WRITE_INTERVAL:
            return
        last_write = now
        _write_progress(job.pk, {"step": step, "total": total, "metrics": metrics})
        if _state(job.pk) == Job.State.CANCELLED:
            raise JobCancelled

    with _heartbeat(job.pk):
        return function(job.pk, progress)


@contextlib.contextmanager
def _heartbeat(job_id: int) -> Iterator[None]:
    """Beat for a job whose function runs here, between its progress reports.

    A dashboard on another machine cannot ask this one whether the worker lives: it goes by
    the heartbeat (levers9.jobs.processes.process_alive), and a function may go minutes
    between reports (one long reading of replies). A thread of its own, on a connection of
    its own, in the job's workspace.
    """
    schema_name, stopping = connection.schema_name, threading.Event()

    def beat() -> None:
        try:
            with schema_context(schema_name):
                while not stopping.wait(HEARTBEAT_INTERVAL):
                    with contextlib.suppress(DatabaseError):  # the next beat tries again
                        Job.objects.filter(pk=job_id).update(heartbeat_at=timezone.now())
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        # Not for ever: a beat waiting on a row lock (a caller's open transaction) must not
        # hold the worker; it ends by itself.
        thread.join(timeout=HEARTBEAT_INTERVAL)


def _write_progress(job_id: int, record: dict[str, Any]) -> None:
    metrics = record.get("metrics") or {}
    earlier = (
        Job.objects.filter(pk=job_id).values("progress_step", "progress_total", "metrics").first()
    )
    phase = {}
    if earlier is not None and _new_phase(earlier, record):
        # The count restarted: the time left is read from here on.
        phase = {"phase_started_at": timezone.now(), "phase_started_step": record["step"]}
    Job.objects.filter(pk=job_id).update(
        progress_step=record["step"],
        progress_total=record["total"],
        metrics=metrics,
        heartbeat_at=timezone.now(),
        **phase,
    )
    job_event_send(job_id)


def _new_phase(earlier: dict[str, Any], record: dict[str, Any]) -> bool:
    """A different phase named, a different total, or a count that went back."""
    before, now = earlier["metrics"] or {}, record.get("metrics") or {}
    return (
        before.get("phase") != now.get("phase")
        or earlier["progress_total"] != record["total"]
        or earlier["progress_step"] > record["step"]
    )


def _stop(process: subprocess.Popen) -> None:
    """Stop the trainer and anything it started: its guard leads the group, and stops the
    processes below it that started sessions of their own (torchrun's ranks)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
        os.killpg(process.pid, signal.SIGCONT)  # a suspended trainer must hear it too
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
