"""A released version answers nothing, so it cannot be evaluated: starting says so, and a
version released while its evaluation waits fails that evaluation with the reason."""

from __future__ import annotations

import pytest

from evaluation.models import Evaluation
from evaluation.services import EvaluationError, evaluation_run, evaluation_start
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
