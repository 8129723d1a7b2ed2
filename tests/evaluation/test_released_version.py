"""A released version answers nothing, so it cannot be evaluated: starting says so, and a
version released while its evaluation waits fails that evaluation with the reason."""

from __future__ import annotations

import pytest

from evaluation.errors import EvaluationError
from evaluation.models import Evaluation
from evaluation.replay import evaluation_run
from evaluation.services import evaluation_start
from policies.models import PolicyVersion


def _release(version: PolicyVersion) -> None:
    PolicyVersion.objects.filter(pk=version.pk).update(status=PolicyVersion.Status.RELEASED)


def test_it_refuses_to_start_with_a_released_version(lettings, pushy, baseline):
    _release(pushy)
    with pytest.raises(EvaluationError, match="released and answers nothing"):
        evaluation_start(world=lettings, candidate=pushy, baseline=baseline)
    with pytest.raises(EvaluationError, match="released and answers nothing"):
        evaluation_start(world=lettings, candidate=baseline, baseline=pushy)
    assert not Evaluation.objects.exists()


def test_it_refuses_a_version_against_itself(lettings, baseline):
    with pytest.raises(EvaluationError, match="two different versions"):
        evaluation_start(world=lettings, candidate=baseline, baseline=baseline)


def test_it_fails_an_evaluation_whose_version_was_released_while_it_waited(
    lettings, pushy, baseline, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        evaluation = evaluation_start(world=lettings, candidate=pushy, baseline=baseline)
    _release(pushy)
    with pytest.raises(EvaluationError, match="cannot be evaluated"):
        evaluation_run(evaluation=evaluation)
    evaluation.refresh_from_db()
    assert evaluation.state == Evaluation.State.FAILED
    assert "released" in evaluation.error
    assert not evaluation.answers.exists()


def test_a_version_released_mid_way_gives_no_verdict_on_the_moments_left(
    lettings, pushy, baseline, django_capture_on_commit_callbacks, monkeypatch
):
    from policies import agents
    from policies.agents import VersionCannotAnswer

    real_reply = agents.version_reply
    asked = {"pushy": 0}

    def released_after_three(version, moment):
        if version.pk == pushy.pk:
            asked["pushy"] += 1
            if asked["pushy"] > 3:
                raise VersionCannotAnswer(f"{version.label} is released and answers nothing.")
        return real_reply(version, moment)

    monkeypatch.setattr(agents, "version_reply", released_after_three)
    with django_capture_on_commit_callbacks(execute=False):
        evaluation = evaluation_start(world=lettings, candidate=pushy, baseline=baseline)
    evaluation_run(evaluation=evaluation)
    evaluation.refresh_from_db()
    summary = evaluation.summary
    assert summary["compared"] == 3 < summary["moments"] / 2
    # The judge's verdict; on scripted customers the simulator's duel (moves, not replies)
    # still gives the evaluation's own.
    assert summary["verdict"] == summary["judge_verdict"] == "incomplete"
    assert summary["candidate"]["errors"] == summary["moments"] - 3

    from evaluation.verdict_words import verdict_explained

    words = verdict_explained(summary, candidate=pushy.label, baseline=baseline.label)
    assert f"compared at only 3 of {summary['moments']} moments" in words["sentence"]
    assert f"{pushy.label} failed at {summary['moments'] - 3}" in words["sentence"]


def test_one_call_gives_a_win_rate_but_no_interval():
    from evaluation.scoring import verdict_of, win_rate_with_interval

    rate, low, high = win_rate_with_interval([[0.0, 0.0, 1.0, 0.0]], seed=0)
    assert rate == 0.25
    assert low is None
    assert high is None
    assert verdict_of(low, high) == ""
    _, low, high = win_rate_with_interval([[0.0, 0.0], [1.0, 0.0]], seed=0)
    assert low is not None
    assert high is not None
