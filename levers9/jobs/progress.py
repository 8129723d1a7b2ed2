"""What browsers see of a job, pushed over the websocket on every change."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django_tenants.utils import schema_context

from levers9.events import workspace_event_send
from levers9.jobs.models import Job
from levers9.jobs.selectors import jobs_about_read, without_server_paths


def job_payload(job: Job) -> dict[str, Any]:
    eta = job.eta_seconds
    return {
        "id": job.pk,
        "title": job.title or job.trainer,
        "trainer": job.trainer,
        "state": job.state,
        "state_label": job.get_state_display(),
        "step": job.progress_step,
        "total": job.progress_total,
        "fraction": round(job.progress_fraction, 4),
        "eta_seconds": None if eta is None else round(eta, 1),
        "metrics": job.metrics,
        "error": without_server_paths(job.error),
        "produced_version": getattr(job.about.produced_version, "label", None),
    }


def job_payloads(jobs: list[Job]) -> list[dict[str, Any]]:
    """A page's jobs as browsers see them, what each is about read in one go per kind."""
    return [job_payload(job) for job in jobs_about_read(list(jobs))]


def job_event_send(job_id: int) -> None:
    """Tell the workspace's browsers how the job stands once the write that changed it is
    committed (at once outside a transaction): an event sent from inside an atomic block that
    rolls back would show a state that never was."""
    schema_name = connection.schema_name
    transaction.on_commit(lambda: _job_event_push(job_id, schema_name))


def _job_event_push(job_id: int, schema_name: str) -> None:
    with schema_context(schema_name):
        job = Job.objects.filter(pk=job_id).first()
        if job is not None:
            workspace_event_send({"type": "job", "job": job_payload(job)}, schema_name=schema_name)
