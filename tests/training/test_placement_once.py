"""A job is queued once however many placements race for it: fifty placements of one job from
fifty threads (each with its own database connection) queue exactly one task."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_place, job_start
from levers9.pools import pool_default
from tests.e2e.workspaces import fresh_workspace

pytestmark = pytest.mark.slow

PLACEMENTS = 50


def test_fifty_racing_placements_queue_one_task(committed_db, monkeypatch, tmp_path, settings):
    settings.DATASETS_DIR = tmp_path / "datasets"
    queued: list[tuple] = []
    lock = threading.Lock()

    def enqueue(dotted_path, *args, **options):
        with lock:
            queued.append((dotted_path, *args))
            return f"task-{len(queued)}"

    monkeypatch.setattr("levers9.jobs.services.enqueue_in_workspace", enqueue)
    with fresh_workspace("place") as created:
        schema = created.workspace.schema_name
        # job_start's own placement runs on commit: drop it, so only the race places.
        with schema_context(schema), monkeypatch.context() as patched:
            patched.setattr("levers9.jobs.services.transaction.on_commit", lambda _f: None)
            job = job_start(
                kind="engines",
                trainer="q-learning-online",
                spec={"pack": "lettings"},
                pool=pool_default(gpu=False),
            )
        start = threading.Barrier(PLACEMENTS)
        errors: list[BaseException] = []

        def place() -> None:
            try:
                with schema_context(schema):
                    start.wait()
                    job_place(job_id=job.pk)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=place) for _ in range(PLACEMENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        assert len(queued) == 1
        with schema_context(schema):
            placed = Job.objects.get(pk=job.pk)
            assert placed.state == Job.State.SUBMITTED
            assert placed.task_id == "task-1"
