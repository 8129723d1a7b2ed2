"""The job lifecycle without processes: packing, finish exactly once, resume's checks,
refused results, cancel — each against rows as the platform writes them."""

from __future__ import annotations

import base64
import os
import pickle
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from levers9.jobs.adoption import job_resume, jobs_follow
from levers9.jobs.models import Job
from levers9.jobs.services import (
    JOB_TASK,
    JobError,
    job_cancel,
    job_finish,
    job_place,
    job_start,
)
from levers9.models import CardAllocation
from levers9.pools import pool_default
from policies.models import PolicyVersion
from tests.job_rows import cpu_job_row
from tests.worker_tasks import worker_task_create
from trainers.moves.strategy import SCRIPTED, strategy_table
from training.runs import training_run_start


def _learned_result() -> dict:
    table = strategy_table(SCRIPTED, scenario=None, max_turns=8)
    return {
        "algorithm": "q-learning-online",
        "strategy": {"kind": "table", "default": table, "tables": {}},
        "knobs": {"episodes": 10},
        "seed": 3,
        "scenarios": [{"slug": "x", "optimal_return": 2.0, "learned_return": 1.9}],
    }


@pytest.fixture
def job(in_workspace, django_capture_on_commit_callbacks):
    parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
    with django_capture_on_commit_callbacks(execute=False):
        return training_run_start(
            world=parent.world,
            parent=parent,
            kind="train",
            trainer="q-learning-online",
            spec={"algorithm": "q-learning-online"},
            pool=pool_default(gpu=False),
        )


def test_it_packs_the_spec_and_asks_for_cards(job):
    assert job.state == Job.State.PACKING
    with open(job.spec_path) as spec:
        assert '"job":' in spec.read()
    allocation = CardAllocation.objects.get(pk=job.card_allocation_id)
    assert (allocation.state, allocation.card_count, allocation.holder_id) == ("waiting", 1, job.pk)


def test_it_finishes_exactly_once_and_makes_one_version(job):
    task_id = worker_task_create(job, result=_learned_result())
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, task_id=task_id)
    assert job_finish(job_id=job.pk) is True
    assert job_finish(job_id=job.pk) is False
    assert jobs_follow(watcher="test:1") == []
    job.refresh_from_db()
    assert job.state == Job.State.DONE
    produced = job.training_run.produced_version
    assert produced.label == "v2 · trained"
    assert produced.parent.number == 1
    assert produced.learned_from["seed"] == 3
    assert PolicyVersion.objects.count() == 2
    assert CardAllocation.objects.get(pk=job.card_allocation_id).state == "released"


def test_it_fails_a_job_whose_trainer_failed(job):
    task_id = worker_task_create(job, result="RuntimeError: out of memory", success=False)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, task_id=task_id)
    job_finish(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert "out of memory" in job.error
    assert PolicyVersion.objects.count() == 1


class _Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_it_refuses_a_tampered_result_and_says_so(job, tmp_path):
    marker = tmp_path / "ran"
    task_id = worker_task_create(job, result={"fine": 1})
    payload = base64.b64encode(pickle.dumps(_Evil(str(marker)))).decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE public.django_q_task SET result = %s WHERE id = %s", [payload, task_id]
        )
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, task_id=task_id)
    job_finish(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert "refused" in job.error
    assert not marker.exists()
    assert PolicyVersion.objects.count() == 1


def test_it_says_a_job_interrupted_while_packing_must_start_again(job):
    # It died before its card request was in place.
    Job.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(minutes=5), card_allocation_id=None
    )
    jobs_follow(watcher="test:1")
    job.refresh_from_db()
    assert job.state == Job.State.INTERRUPTED
    assert "start it again from Train" in job.error
    with pytest.raises(JobError, match="start it again from Train"):
        job_resume(job=job)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"trainer": "dpo"}, "not this job's"),
        ({"schema": "ws_rival"}, "another workspace"),
        ({"started": timezone.now() - timedelta(days=1)}, "started before this job"),
    ],
)
def test_it_refuses_to_resume_with_a_task_that_is_not_this_jobs(job, change, reason):
    Job.objects.filter(pk=job.pk).update(state=Job.State.INTERRUPTED, task_id="")
    job.refresh_from_db()
    wrong = worker_task_create(job, result=_learned_result(), **change)
    with pytest.raises(JobError, match=reason):
        job_resume(job=job, task_id=wrong)
    job.refresh_from_db()
    assert (job.state, job.task_id) == (Job.State.INTERRUPTED, "")
    assert PolicyVersion.objects.count() == 1


def test_it_resumes_with_the_task_the_launcher_never_found(job):
    Job.objects.filter(pk=job.pk).update(state=Job.State.INTERRUPTED, task_id="")
    job.refresh_from_db()
    found = worker_task_create(job, result=_learned_result())
    resumed = job_resume(job=job, task_id=found)
    assert resumed.state == Job.State.DONE
    assert resumed.task_id == found
    assert "Resumed by hand" in resumed.notes
    assert PolicyVersion.objects.count() == 2


def test_it_adopts_a_job_whose_dashboard_went_away_and_finishes_it(job):
    task_id = worker_task_create(job, result=_learned_result())
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        task_id=task_id,
        watcher="elsewhere:1",
        watched_at=timezone.now() - timedelta(minutes=5),
    )
    assert jobs_follow(watcher="test:2") == [job.pk]
    job.refresh_from_db()
    assert job.state == Job.State.DONE
    assert "went away" in job.notes
    assert "Adopted by the dashboard test:2" in job.notes


def test_it_leaves_a_job_another_live_dashboard_follows(job):
    task_id = worker_task_create(job, result=_learned_result())
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, task_id=task_id, watcher="elsewhere:1", watched_at=timezone.now()
    )
    assert jobs_follow(watcher="test:2") == []
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING


def test_it_cancels_and_frees_the_cards(job):
    cancelled = job_cancel(job=job)
    assert cancelled.state == Job.State.CANCELLED
    assert CardAllocation.objects.get(pk=job.card_allocation_id).state == "released"
    with pytest.raises(JobError, match="only a job that has not ended"):
        job_cancel(job=cancelled)


def test_it_queues_the_task_only_once_the_cards_are_granted(job, monkeypatch):
    queued: list[tuple] = []
    monkeypatch.setattr(
        "levers9.jobs.services.enqueue_in_workspace",
        lambda *args, **kwargs: queued.append(args) or "task-1",
    )
    blocker = CardAllocation.objects.get(pk=job.card_allocation_id)
    blocker.pk = None  # another job holding the CPU pool's only slot, requested earlier
    blocker.id = None
    blocker.state = "held"
    blocker.holder_id = 999
    blocker.save()
    CardAllocation.objects.filter(pk=blocker.pk).update(id=0)
    assert job_place(job_id=job.pk) is False
    job.refresh_from_db()
    assert job.state == Job.State.PACKING
    assert job.metrics["waiting_for_cards"] == 0
    assert job.metrics["waiting_why"].startswith("Next in line on local-cpu")
    assert queued == []
    CardAllocation.objects.filter(pk=0).update(state="released")
    assert job_place(job_id=job.pk) is True
    job.refresh_from_db()
    assert (job.state, job.task_id) == (Job.State.SUBMITTED, "task-1")
    assert queued[0][:3] == (JOB_TASK, job.pk, "q-learning-online")


def test_it_refuses_an_unknown_trainer(in_workspace):
    with pytest.raises(JobError, match="Unknown trainer"):
        job_start(kind="train", trainer="magic", spec={}, pool=pool_default(gpu=False))


def test_it_runs_a_job_whose_worker_was_quicker_than_the_dashboard(
    in_workspace, monkeypatch, django_capture_on_commit_callbacks
):
    """On Redis the worker can take the task before job_place marks the job submitted: the
    job must run (not be taken for cancelled) and still get its task id."""
    from levers9.jobs.runner import job_run

    with django_capture_on_commit_callbacks(execute=False):
        job = job_start(
            kind="engines",
            trainer="q-learning-online",
            spec={
                "algorithm": "q-learning-online",
                "knobs": {"episodes": 64, "batch_episodes": 64, "time_budget_s": 0},
                "scenarios": ["young-professional-price"],
            },
            pool=pool_default(gpu=False),
        )
    results: list[dict] = []

    def quick_worker(_path, job_id, trainer, **_options):
        assert Job.objects.get(pk=job_id).state == Job.State.PACKING  # the race under test
        results.append(job_run(job_id, trainer))
        return "task-quick"

    monkeypatch.setattr("levers9.jobs.services.enqueue_in_workspace", quick_worker)
    assert job_place(job_id=job.pk) is True
    job.refresh_from_db()
    assert "cancelled" not in results[0]
    assert results[0]["algorithm"] == "q-learning-online"
    assert (job.state, job.task_id) == (Job.State.RUNNING, "task-quick")
    assert job.started_at is not None


def test_a_failed_job_says_one_sentence_and_keeps_the_traceback_out(caplog):
    from levers9.jobs.services import failure_sentence

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/levers9/trainers/wording/dpo.py", line 12, in run\n'
        "    model = load(base)\n"
        "ValueError: the base 'x/y' is not on the models volume\n"
    )
    sentence = failure_sentence(traceback)
    assert sentence.startswith("ValueError: the base 'x/y' is not on the models volume")
    assert "/srv/levers9" not in sentence
    assert "Traceback" not in sentence
    assert failure_sentence("").startswith("it stopped without saying why")


# --- the time left, by phase ---------------------------------------------------------------


def test_the_time_left_is_read_from_the_current_phase(in_workspace):
    from levers9.jobs.runner import _write_progress

    # Twenty minutes of replies, then a lens that counts its own 3,908 openings fast: the
    # whole job's rate made the lens's first minute read as hours left.
    job = cpu_job_row(
        kind="evaluate",
        trainer="evaluate",
        state=Job.State.RUNNING,
        started_at=timezone.now() - timedelta(minutes=20),
    )
    _write_progress(job.pk, {"step": 470, "total": 480, "metrics": {"phase": "replies"}})
    _write_progress(job.pk, {"step": 480, "total": 480, "metrics": {"phase": "replies"}})
    replies_began = Job.objects.get(pk=job.pk).phase_started_at
    assert replies_began is not None

    _write_progress(job.pk, {"step": 100, "total": 3908, "metrics": {"phase": "lens"}})
    job = Job.objects.get(pk=job.pk)
    assert job.phase_started_at > replies_began
    assert job.phase_started_step == 100
    assert job.eta_seconds is None  # nothing counted in this phase yet

    Job.objects.filter(pk=job.pk).update(phase_started_at=timezone.now() - timedelta(seconds=10))
    _write_progress(job.pk, {"step": 600, "total": 3908, "metrics": {"phase": "lens"}})
    job = Job.objects.get(pk=job.pk)
    assert job.phase_started_step == 100  # the same phase goes on
    # 500 openings in 10 s: about 66 s for the 3,308 left (the whole job's rate said 2.2 h).
    assert 60 < job.eta_seconds < 80
