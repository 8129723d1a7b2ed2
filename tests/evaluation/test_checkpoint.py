"""The checkpoint of a new version: it against its parent on the same held-out calls, started
as a job by the job platform's finish once the version is registered."""

from __future__ import annotations

import pytest

from evaluation.call_sets import call_set_ensure
from evaluation.errors import EvaluationError
from evaluation.models import Evaluation
from evaluation.runner import evaluation_job_run
from evaluation.services import evaluation_checkpoint_start, evaluation_job_finish


def test_it_checkpoints_a_version_against_its_parent_on_the_held_out_calls(
    lettings, pushy, baseline, evaluate, django_capture_on_commit_callbacks
):
    earlier = evaluate(lettings, pushy, baseline)
    with django_capture_on_commit_callbacks(execute=False):
        job = evaluation_checkpoint_start(version=pushy)
    assert job.kind == "evaluate"
    assert job.trainer == "evaluate"
    checkpoint = Evaluation.objects.get(job=job)
    assert checkpoint.world == lettings  # the world it learned in
    assert job.about.parent_version == baseline  # what the jobs' pages say it is about
    assert checkpoint.purpose == Evaluation.Purpose.CHECKPOINT
    assert (checkpoint.candidate, checkpoint.baseline) == (pushy, baseline)
    # The same held-out calls as every evaluation of that world.
    assert checkpoint.call_set_id == earlier.call_set_id == call_set_ensure(world=lettings).pk
    # Two move strategies, no model asked: short work, done within a minute of its version
    # rather than at the back of the pool's line (levers9.pools).
    from levers9.models import CardAllocation
    from levers9.pools import SHORT_JOB

    assert CardAllocation.objects.get(pk=job.card_allocation_id).holder_kind == SHORT_JOB

    result = evaluation_job_run(job.pk, lambda step, total, **metrics: None)
    assert result["per_call"] == earlier.summary["per_call"]
    evaluation_job_finish(job=job, result=result)  # the dashboard's finish: already done
    checkpoint.refresh_from_db()
    assert checkpoint.state == Evaluation.State.DONE


def test_it_says_why_a_version_without_a_parent_has_no_checkpoint(baseline, lettings):
    with pytest.raises(EvaluationError, match="no parent"):
        evaluation_checkpoint_start(version=baseline)


def test_it_waits_for_a_new_version_whose_endpoint_is_still_starting(
    lettings, pushy, baseline, monkeypatch, django_capture_on_commit_callbacks
):
    from evaluation import replay
    from policies.models import PolicyVersion

    PolicyVersion.objects.filter(pk=pushy.pk).update(status=PolicyVersion.Status.STARTING)
    with django_capture_on_commit_callbacks(execute=False):
        job = evaluation_checkpoint_start(version=pushy)  # queued while it starts
    waits: list[str] = []

    def endpoint_comes_up(seconds: float) -> None:
        PolicyVersion.objects.filter(pk=pushy.pk).update(status=PolicyVersion.Status.ANSWERING)

    monkeypatch.setattr(replay.time, "sleep", endpoint_comes_up)
    result = evaluation_job_run(job.pk, lambda step, total, **m: waits.append(m["phase"]))
    assert waits[0] == f"waiting for {pushy.label} to answer"
    assert result["candidate"]["answered"] == result["moments"]


def test_it_gives_up_on_a_version_that_never_answers(
    lettings, pushy, baseline, monkeypatch, django_capture_on_commit_callbacks
):
    from evaluation import replay
    from policies.models import PolicyVersion

    PolicyVersion.objects.filter(pk=pushy.pk).update(status=PolicyVersion.Status.STARTING)
    with django_capture_on_commit_callbacks(execute=False):
        job = evaluation_checkpoint_start(version=pushy)
    monkeypatch.setattr(replay, "ANSWER_WAIT_SECONDS", 0)
    with pytest.raises(EvaluationError, match="starting and answers nothing"):
        evaluation_job_run(job.pk, lambda step, total, **metrics: None)
    assert Evaluation.objects.get(job=job).state == Evaluation.State.FAILED


def _wording_version(baseline, *, algorithm: str, picks: int, base: str = "smollm2-135m-instruct"):
    from arena.models import World
    from policies.services import version_register

    return version_register(
        world=World.objects.get(slug="lettings"),
        name=algorithm,
        parent=baseline,
        move_strategy={},
        learned_from={
            "pack": "lettings",
            "algorithm": algorithm,
            "preference_version": picks,
            "base": base,
        },
    )


def test_an_rlhf_version_is_also_checkpointed_against_dpo_of_the_same_picks(
    lettings, baseline, django_capture_on_commit_callbacks
):
    from types import SimpleNamespace

    from evaluation.services import dpo_benchmark_of, version_checkpoint

    same = _wording_version(baseline, algorithm="dpo", picks=3)
    _wording_version(baseline, algorithm="dpo", picks=2)  # other picks: not the benchmark
    _wording_version(baseline, algorithm="dpo", picks=3, base="Qwen/Qwen3-0.6B")  # other base
    rlhf = _wording_version(baseline, algorithm="rlhf", picks=3)
    assert dpo_benchmark_of(rlhf) == same
    assert dpo_benchmark_of(same) is None  # only RLHF has a benchmark to beat

    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), rlhf)
    checkpoints = Evaluation.objects.filter(candidate=rlhf, purpose=Evaluation.Purpose.CHECKPOINT)
    assert {c.baseline for c in checkpoints} == {baseline, same}
    # Both on the same held-out calls, so the two numbers can be read side by side.
    assert len({c.call_set_id for c in checkpoints}) == 1


def test_a_dpo_version_is_checkpointed_against_its_parent_only(
    lettings, baseline, django_capture_on_commit_callbacks
):
    from types import SimpleNamespace

    from evaluation.services import version_checkpoint

    dpo = _wording_version(baseline, algorithm="dpo", picks=3)
    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), dpo)
    assert [c.baseline for c in Evaluation.objects.filter(candidate=dpo)] == [baseline]
