"""A job row on a CPU pool, written straight to the table as the platform would have left it,
for tests of what reads jobs (pages, finishes, estimates, the runner): nothing is placed or
queued."""

from __future__ import annotations

from levers9.jobs.models import Job


def cpu_job_row(*, kind: str, trainer: str, pool_name: str = "local-cpu", **fields) -> Job:
    return Job.objects.create(
        kind=kind, trainer=trainer, pool_name=pool_name, card_type="cpu", **fields
    )
