"""A finished q-learning Engines run, as the worker leaves it: the trainer's result on a done job
(through JSON, as the worker writes it) and the run's record of its world and parent."""

from __future__ import annotations

import json

from arena.models import World
from levers9.jobs.models import Job
from policies.models import PolicyVersion
from tests.job_rows import cpu_job_row
from trainers.moves.q_learning import run as q_learning_run
from training.models import TrainingRun


def q_learning_run_finished(*, world: World, parent: PolicyVersion, episodes: int) -> Job:
    result = q_learning_run(
        {
            "algorithm": "q-learning-online",
            "knobs": {"episodes": episodes, "time_budget_s": 0},
            "scenarios": ["young-professional-price"],
        }
    )
    job = cpu_job_row(
        kind="engines",
        trainer="q-learning-online",
        state=Job.State.DONE,
        workspace_schema="ws_acme",
        result=json.loads(json.dumps(result)),
    )
    TrainingRun.objects.create(job=job, world=world, parent_version=parent)
    return job
