"""The worker side of an evaluation job: registered as the in-worker trainer "evaluate"
(evaluation.apps), so the job platform calls it inside the job's workspace, in the worker process,
with the same progress reporting a trainer gets (it raises JobCancelled on a cancel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluation.errors import EvaluationError
from evaluation.models import Evaluation
from evaluation.replay import evaluation_run


def evaluation_job_run(job_id: int, progress: Callable[..., None]) -> dict[str, Any]:
    """Run the job's evaluation; returns its summary (plain values) as the job's result."""
    # Evaluation.job is set in the transaction that starts the job, so it is there before the
    # task is queued.
    evaluation = (
        Evaluation.objects.select_related("world", "call_set", "candidate", "baseline")
        .filter(job_id=job_id)
        .first()
    )
    if evaluation is None:
        raise EvaluationError(f"Job {job_id} names no evaluation of this workspace.")
    return evaluation_run(evaluation=evaluation, progress=progress)
