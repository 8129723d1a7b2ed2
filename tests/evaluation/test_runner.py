"""The evaluation job runs in the worker through the real runner function, registered in the
job platform; it reports progress and returns plain values, and the evaluation keeps them."""

from __future__ import annotations

import pickle

import pytest

from evaluation.models import Evaluation
from evaluation.runner import evaluation_job_run
from evaluation.services import evaluation_start, evaluations_reconcile
from levers9.jobs import runner
from levers9.jobs.kinds import job_kind, trainer_lookup
from levers9.jobs.models import Job
from levers9.task_results import plain_value_from_pickle


@pytest.fixture
def started(lettings, pushy, baseline, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        return evaluation_start(world=lettings, candidate=pushy, baseline=baseline, seed=5)


def test_it_is_registered_as_an_in_worker_task():
    assert trainer_lookup("evaluate").function is evaluation_job_run
    assert job_kind("evaluate").label == "Evaluation"


def test_it_runs_the_job_reports_progress_and_returns_plain_values(started):
    job = started.job
    assert job.kind == "evaluate"
    # The platform keeps no product id; the job's evaluation is found by Evaluation.job, and
    # shown in finish_needs as before.
    assert job.finish_needs == {}
    assert job.finish_needs_shown == {"evaluation": started.pk}
    seen: list[tuple[int, int, dict]] = []

    result = evaluation_job_run(
        job.pk, lambda step, total, **metrics: seen.append((step, total, metrics))
    )

    assert seen
    assert seen[-1][0] == seen[-1][1]
    assert all(metrics.get("phase") for _step, _total, metrics in seen)
    # What the platform stores (a pickle) reads back as plain values, with no classes run.
    assert plain_value_from_pickle(pickle.dumps(result)) == result
    started.refresh_from_db()
    assert started.state == Evaluation.State.DONE
    assert started.summary == result
    assert result["seed"] == 5
    assert result["calls"] == 40


def test_it_runs_once_however_often_the_task_is_delivered(started):
    first = evaluation_job_run(started.job.pk, lambda step, total, **metrics: None)
    answers = started.answers.count()
    again = evaluation_job_run(started.job.pk, lambda step, total, **metrics: None)
    assert again == first
    assert started.answers.count() == answers


def test_it_stops_when_the_job_is_cancelled(started):
    def cancelled(step, total, **metrics):
        raise runner.JobCancelled

    with pytest.raises(runner.JobCancelled):
        evaluation_job_run(started.job.pk, cancelled)
    started.refresh_from_db()
    assert started.state == Evaluation.State.CANCELLED


def test_it_marks_an_evaluation_failed_when_its_job_failed_without_it(started):
    Job.objects.filter(pk=started.job_id).update(state=Job.State.FAILED, error="worker lost")
    assert evaluations_reconcile() == 1
    started.refresh_from_db()
    assert started.state == Evaluation.State.FAILED
    assert started.error == "worker lost"
