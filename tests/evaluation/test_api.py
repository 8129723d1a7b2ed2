"""The evaluation API: start an evaluation, read its results and episodes, and the lens at
/api/rl/packs/<pack>/score-vs-outcome; managers start, anyone with a role reads, and another
workspace is refused on every path."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from evaluation.models import Evaluation
from evaluation.runner import evaluation_job_run
from policies.models import PolicyVersion
from tests.conftest import api_token, client_for, make_user, token_client
from trainers.judge.rubric import DIMENSIONS


def _run(workspace, evaluation_id: int) -> None:
    with schema_context(workspace.schema_name):
        job_id = Evaluation.objects.get(pk=evaluation_id).job_id
        evaluation_job_run(job_id, lambda step, total, **metrics: None)


@pytest.fixture
def finished(workspace, lettings, pushy, baseline, evaluate):
    return evaluate(lettings, pushy, baseline).pk


def test_it_starts_an_evaluation_and_serves_its_results(owner_client, workspace, lettings, pushy):
    response = owner_client.post(
        "/api/rl/evaluations/",
        {"pack": "lettings", "candidate": pushy.number, "baseline": 1, "seed": 3},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    started = response.json()
    assert started["state"] == "queued"
    assert (started["candidate"], started["baseline"], started["seed"]) == (pushy.number, 1, 3)
    assert started["job"]
    assert owner_client.get(f"/api/rl/jobs/{started['job']}/").json()["kind"] == "evaluate"

    _run(workspace, started["id"])
    results = owner_client.get(f"/api/rl/evaluations/{started['id']}/").json()
    assert results["state"] == "done"
    summary = results["summary"]
    assert summary["ci"][0] <= results["win_rate"] == summary["win_rate"] <= summary["ci"][1]
    assert results["verdict"] in {"won", "lost", "even"}
    assert set(summary["candidate"]["radar"]) == set(DIMENSIONS)
    listing = owner_client.get("/api/rl/evaluations/").json()
    assert [row["id"] for row in listing["results"]] == [started["id"]]


def test_a_second_start_of_the_same_versions_returns_the_one_on_its_way(
    owner_client, workspace, lettings, pushy
):
    """Before: each start replayed every held-out call again beside the first."""
    body = {"pack": "lettings", "candidate": pushy.number, "baseline": 1, "seed": 3}
    first = owner_client.post("/api/rl/evaluations/", body, content_type="application/json")
    again = owner_client.post("/api/rl/evaluations/", body, content_type="application/json")
    assert (first.status_code, again.status_code) == (202, 202)
    assert (first.json()["joined"], again.json()["joined"]) == (False, True)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["job"] == first.json()["job"]
    # Another seed is other calls' draw: its own evaluation.
    other = owner_client.post(
        "/api/rl/evaluations/", {**body, "seed": 4}, content_type="application/json"
    )
    assert other.json()["id"] != first.json()["id"]
    # Once the first has ended, a start runs again.
    _run(workspace, first.json()["id"])
    rerun = owner_client.post("/api/rl/evaluations/", body, content_type="application/json")
    assert (rerun.json()["joined"], rerun.json()["id"] != first.json()["id"]) == (False, True)


def test_it_defaults_to_the_newest_version_against_its_parent(owner_client, lettings, pushy):
    response = owner_client.post(
        "/api/rl/evaluations/", {"pack": "lettings"}, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    assert (response.json()["candidate"], response.json()["baseline"]) == (pushy.number, 1)


def test_it_opens_a_regression_as_an_episode(owner_client, finished, workspace):
    with schema_context(workspace.schema_name):
        summary = Evaluation.objects.get(pk=finished).summary
    position = summary["regressions"][0]
    episode = owner_client.get(f"/api/rl/evaluations/{finished}/episodes/{position}/").json()
    assert episode["regression"] is True
    assert episode["position"] == position
    for turn in episode["turns"]:
        sides = [reply["side"] for reply in turn["replies"]]
        assert sides == ["candidate", "baseline", "yardstick"]
        for reply in turn["replies"]:
            assert reply["text"]
            assert 0.0 <= reply["judge"]["total"] <= 1.0
    missing = owner_client.get(f"/api/rl/evaluations/{finished}/episodes/999/")
    assert missing.status_code == 404


def test_it_says_a_released_version_cannot_be_evaluated(owner_client, workspace, lettings, pushy):
    with schema_context(workspace.schema_name):
        PolicyVersion.objects.filter(pk=pushy.pk).update(status="released")
    response = owner_client.post(
        "/api/rl/evaluations/",
        {"pack": "lettings", "candidate": pushy.number, "baseline": 1},
        content_type="application/json",
    )
    assert response.status_code == 409
    assert "released and answers nothing" in response.json()["detail"]


def test_it_lets_a_reviewer_read_but_not_start(workspace, lettings, pushy, finished):
    make_user(workspace, "reviewer@acme.test", "reviewer")
    reviewer = client_for(workspace, "reviewer@acme.test")
    refused = reviewer.post(
        "/api/rl/evaluations/", {"pack": "lettings"}, content_type="application/json"
    )
    assert refused.status_code == 403
    assert reviewer.get(f"/api/rl/evaluations/{finished}/").status_code == 200


def test_it_serves_the_lens_at_the_described_address(owner_client, workspace, real_world):
    response = owner_client.get("/api/rl/packs/persuasion/score-vs-outcome")
    assert response.status_code == 200, response.content
    lens = response.json()
    assert lens["pack"] == "persuasion"
    assert lens["observational"] is True
    assert sum(band["calls"] for band in lens["bands"]) == lens["calls_labelled"] > 0
    # Where the chart draws each band: over its share of the world's calls (issue 40).
    for band in lens["bands"]:
        width = band["share_high"] - band["share_low"]
        assert width == pytest.approx(band["calls"] / lens["calls_labelled"], abs=1e-3)
    with schema_context(workspace.schema_name):
        from evaluation.lens import world_score_vs_outcome

        assert world_score_vs_outcome(world=real_world) == lens
    three = owner_client.get("/api/rl/packs/persuasion/score-vs-outcome?bands=3").json()
    assert three["band_count"] == 3
    assert owner_client.get("/api/rl/packs/persuasion/score-vs-outcome?bands=40").status_code == 400
    assert (
        owner_client.get("/api/rl/packs/persuasion/score-vs-outcome?evaluation=x").status_code
        == 404
    )
    assert owner_client.get("/api/rl/packs/nowhere/score-vs-outcome").status_code == 404


def test_it_refuses_another_workspace_on_every_path(outsider_client, workspace, finished):
    paths = [
        "/api/rl/evaluations/",
        f"/api/rl/evaluations/{finished}/",
        f"/api/rl/evaluations/{finished}/episodes/1/",
        "/api/rl/packs/lettings/score-vs-outcome",
    ]
    for path in paths:
        assert outsider_client.get(path).status_code in {401, 403}, path
    started = outsider_client.post(
        "/api/rl/evaluations/", {"pack": "lettings"}, content_type="application/json"
    )
    assert started.status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert Evaluation.objects.count() == 1


def test_it_does_not_let_a_rival_token_see_our_evaluations(other_workspace, finished):
    rival = token_client(other_workspace, api_token(other_workspace, "owner@rival.test"))
    assert rival.get("/api/rl/evaluations/").json()["count"] == 0
    assert rival.get(f"/api/rl/evaluations/{finished}/").status_code == 404


def test_it_documents_the_paths_in_a_schema_that_validates(api_schema):
    assert "/api/rl/packs/{pack}/score-vs-outcome:" in api_schema
    assert "/api/rl/evaluations/{id}/episodes/{position}/:" in api_schema
    assert "/api/rl/evaluations/:" in api_schema
