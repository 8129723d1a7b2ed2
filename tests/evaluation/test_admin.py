"""The operators' view of evaluations in the workspace admin: results read-only, "run again"
as an action through the service, the held-out calls shown and never redrawn; another
workspace is refused."""

from __future__ import annotations

from django_tenants.utils import schema_context

from evaluation.models import Evaluation, EvaluationCallSet


def test_it_lists_evaluations_with_their_results(owner_client, lettings, pushy, baseline, evaluate):
    evaluation = evaluate(lettings, pushy, baseline)
    listing = owner_client.get("/admin/evaluation/evaluation/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert f"{evaluation.summary['win_rate']:.3f}" in html
    change = owner_client.get(f"/admin/evaluation/evaluation/{evaluation.pk}/change/")
    assert change.status_code == 200
    assert f"/evaluate/{evaluation.pk}/" in change.content.decode()
    call_set = owner_client.get(
        f"/admin/evaluation/evaluationcallset/{evaluation.call_set_id}/change/"
    )
    assert call_set.status_code == 200
    assert "seed" in call_set.content.decode()


def test_it_runs_an_evaluation_again_through_the_service(
    owner_client, workspace, lettings, pushy, baseline, evaluate, django_capture_on_commit_callbacks
):
    evaluation = evaluate(lettings, pushy, baseline)
    with django_capture_on_commit_callbacks(execute=False):
        response = owner_client.post(
            "/admin/evaluation/evaluation/",
            {"action": "run_again", "_selected_action": [evaluation.pk]},
        )
    assert response.status_code == 302
    with schema_context(workspace.schema_name):
        again = Evaluation.objects.exclude(pk=evaluation.pk).get()
        assert (again.candidate_id, again.baseline_id) == (pushy.pk, baseline.pk)
        assert again.job_id is not None
        assert EvaluationCallSet.objects.count() == 1


def test_it_refuses_another_workspace_in_the_admin(
    outsider_client, lettings, pushy, baseline, evaluate
):
    evaluation = evaluate(lettings, pushy, baseline)
    response = outsider_client.get(f"/admin/evaluation/evaluation/{evaluation.pk}/change/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
