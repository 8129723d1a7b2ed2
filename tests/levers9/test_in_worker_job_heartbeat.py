"""A job whose function runs in the worker beats while it reports nothing (issue 42, point 6).

A dashboard on another machine cannot ask the worker's machine whether the worker lives: it
goes by the job's heartbeat (levers9.jobs.processes.process_alive) and fails the job after
WORKER_TIMEOUT without one. A function run in the worker (an evaluation, a reading of replies)
may go minutes between progress reports; the runner beats for it meanwhile.

Rows are committed (the beat has a connection of its own), in a workspace of their own.
"""

from __future__ import annotations

from types import SimpleNamespace

from django_tenants.utils import schema_context

from levers9.jobs import runner
from levers9.jobs.models import Job
from tests.e2e.workspaces import committed_db, fresh_workspace  # noqa: F401 - a fixture
from tests.job_rows import cpu_job_row
from tests.processes import wait_until


def test_it_beats_while_the_function_reports_nothing(committed_db, monkeypatch):  # noqa: F811
    monkeypatch.setattr(runner, "HEARTBEAT_INTERVAL", 0.05)

    def silent(job_id: int, progress) -> dict:
        # Says nothing until the job has beaten twice without it.
        beats: set = set()
        wait_until(
            lambda: beats.add(Job.objects.get(pk=job_id).heartbeat_at) or len(beats - {None}) >= 2,
            timeout=20,
            every=0.02,
            what="the job to beat while its function reports nothing",
        )
        return {"quiet": True}

    monkeypatch.setattr(runner, "trainer_lookup", lambda _name: SimpleNamespace(function=silent))
    with fresh_workspace("beat") as created, schema_context(created.workspace.schema_name):
        job = cpu_job_row(
            kind="evaluation",
            trainer="silent",
            workspace_schema=created.workspace.schema_name,
            state=Job.State.RUNNING,
        )
        assert runner._run_in_worker(job) == {"quiet": True}
