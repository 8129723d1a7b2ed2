"""The Evaluate pages (manager role): choose two versions and start, follow the job, read the
results with the radar and the regressions, open a regression as an episode, and the lens on
a world of real calls."""

from __future__ import annotations

from django_tenants.utils import schema_context

from evaluation.models import Evaluation
from evaluation.runner import evaluation_job_run
from policies.models import PolicyVersion
from tests.conftest import client_for, make_user


def test_it_offers_the_newest_version_against_its_parent(owner_client, lettings, pushy):
    page = owner_client.get("/evaluate/?world=lettings")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Start evaluation" in html
    assert f'<option value="{pushy.pk}" selected>{pushy.label}</option>' in html
    assert '<option value="1" selected>v1 · baseline</option>' in html
    assert "scripted customers on fixed seeds" in html


def test_it_starts_follows_and_shows_the_results(owner_client, workspace, lettings, pushy):
    started = owner_client.post(
        "/evaluate/", {"world": "lettings", "candidate": pushy.pk, "baseline": 1, "seed": "0"}
    )
    assert started.status_code == 302
    with schema_context(workspace.schema_name):
        evaluation = Evaluation.objects.get()
    assert started["Location"] == f"/evaluate/{evaluation.pk}/"
    waiting = owner_client.get(started["Location"]).content.decode()
    assert f'data-job="{evaluation.job_id}"' in waiting  # followed live by jobs.js
    assert "results appear here when it finishes" in waiting

    with schema_context(workspace.schema_name):
        evaluation_job_run(evaluation.job_id, lambda step, total, **metrics: None)
        evaluation.refresh_from_db()
    html = owner_client.get(started["Location"]).content.decode()
    assert 'id="radar"' in html
    assert 'id="radar-data"' in html
    assert "plotly/plotly.min.js" in html
    assert f"{evaluation.summary['win_rate']:.3f}" in html
    assert "Regressions" in html
    first = evaluation.summary["regressions"][0]
    assert f'href="/evaluate/{evaluation.pk}/calls/{first}/"' in html
    # The Evaluate page shows the latest results of the world too.
    assert 'id="radar"' in owner_client.get("/evaluate/?world=lettings").content.decode()


def test_it_shows_an_episode_with_both_replies_the_yardstick_and_the_scores(
    owner_client, lettings, pushy, baseline, evaluate
):
    evaluation = evaluate(lettings, pushy, baseline)
    position = evaluation.summary["regressions"][0]
    page = owner_client.get(f"/evaluate/{evaluation.pk}/calls/{position}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "regression" in html
    for side in ("candidate", "baseline", "yardstick"):
        assert f'data-side="{side}"' in html
    assert pushy.label in html
    assert baseline.label in html
    assert "scripted agent" in html
    assert "judge total" in html
    assert "Compliance" in html
    assert owner_client.get(f"/evaluate/{evaluation.pk}/calls/999/").status_code == 404


def test_it_shows_the_lens_on_a_world_of_real_calls(owner_client, real_world):
    html = owner_client.get("/evaluate/?world=persuasion").content.decode()
    assert "Lead-to-order lens" in html
    assert "observational" in html.lower()
    assert 'id="lens-chart"' in html
    assert "5 of 5" in html  # the top band's row
    assert "forty fixed real calls" in html


def test_it_says_which_versions_cannot_be_evaluated(owner_client, workspace, lettings, pushy):
    with schema_context(workspace.schema_name):
        PolicyVersion.objects.filter(pk=pushy.pk).update(status="released")
    html = owner_client.get("/evaluate/").content.decode()
    assert f"{pushy.label} is released and answers nothing, so it cannot be evaluated" in html
    refused = owner_client.post(
        "/evaluate/", {"world": "lettings", "candidate": pushy.pk, "baseline": 1}, follow=True
    )
    assert "released and answers nothing" in refused.content.decode()
    with schema_context(workspace.schema_name):
        assert not Evaluation.objects.exists()


def test_it_needs_the_manager_role(workspace, lettings):
    make_user(workspace, "reviewer@acme.test", "reviewer")
    assert client_for(workspace, "reviewer@acme.test").get("/evaluate/").status_code == 403


def test_it_refuses_another_workspace_the_pages(
    outsider_client, lettings, pushy, baseline, evaluate
):
    evaluation = evaluate(lettings, pushy, baseline)
    for path in (
        "/evaluate/",
        f"/evaluate/{evaluation.pk}/",
        f"/evaluate/{evaluation.pk}/calls/1/",
    ):
        assert outsider_client.get(path).status_code == 302, path  # to this workspace's login
    assert outsider_client.post("/evaluate/", {"world": "lettings"}).status_code == 302
    assert Evaluation.objects.count() == 1
