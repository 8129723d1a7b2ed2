"""Pages (Policies, Environment, Endpoints) and the admin: roles, Runs on in one click, the
missing key variables named, and the rival workspace refused everywhere."""

from __future__ import annotations

import re

import pytest

from arena.models import World
from levers9.jobs.models import Job
from levers9.models import CardAllocation
from policies.endpoints import endpoint_serve_finish, version_serve
from policies.models import Endpoint, PolicyVersion
from tests.pages import page_text


@pytest.fixture
def endpoint(trained_version, gpu_pool, serve_trainer):
    endpoint = version_serve(version=trained_version, gpu_count=2, pool_name=gpu_pool.name)
    return endpoint


def test_it_shows_versions_with_lineage_and_status_to_a_reviewer(trained_version, reviewer_client):
    text = page_text(reviewer_client, "/policies/")
    assert "v2 · trained ← v1 · baseline" in text
    assert "Trained endpoint" in text
    assert "<b>algorithm</b> dpo" in text
    assert "Runs on…" not in text  # a reviewer views; the owner changes
    response = reviewer_client.post(
        f"/policies/{trained_version.pk}/runs-on/", {"provider": "vllm"}
    )
    assert response.status_code == 403


def test_it_names_the_missing_key_variables_when_no_keys_are_set(in_workspace, owner_client):
    text = page_text(owner_client, "/policies/")
    assert "Runs on…" in text
    assert "Not offered: set OPENAI_API_KEY on the dashboard pod." in text
    assert "Not offered: set ANTHROPIC_API_KEY on the dashboard pod." in text
    environment = page_text(owner_client, "/environment/")
    assert "OpenAI — set OPENAI_API_KEY" in environment
    assert "Anthropic — set ANTHROPIC_API_KEY" in environment
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    refused = owner_client.post(
        f"/api/rl/policies/{baseline.pk}/runs-on",
        {"provider": "openai", "model": "gpt-4o-mini"},
        content_type="application/json",
    )
    assert refused.status_code == 409
    assert "set OPENAI_API_KEY" in refused.json()["detail"]


def test_it_offers_openai_once_its_key_is_set(in_workspace, owner_client, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-offered-0001")
    text = page_text(owner_client, "/policies/")
    assert "Run on OpenAI" in text
    assert "set OPENAI_API_KEY" not in text
    assert "set ANTHROPIC_API_KEY" in text


def test_it_moves_a_version_in_one_click_and_back(in_workspace, owner_client, stub):
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    response = owner_client.post(
        f"/policies/{baseline.pk}/runs-on/",
        {
            "provider": "vllm",
            "endpoint_url": stub.base_url,
            "model": "Qwen/Qwen3-14B",
            "lora_adapter": "v1-wording",
            "api_key_env": "VLLM_API_KEY",
        },
    )
    assert response.status_code == 302
    baseline.refresh_from_db()
    assert (baseline.provider, baseline.lora_adapter, baseline.api_key_env) == (
        "vllm",
        "v1-wording",
        "VLLM_API_KEY",
    )
    badge = page_text(owner_client, "/?world=lettings")
    assert "v1 · baseline on vLLM endpoint v1-wording" in badge
    owner_client.post(f"/policies/{baseline.pk}/runs-on/", {"provider": "simulator"})
    baseline.refresh_from_db()
    assert (baseline.provider, baseline.provider_model, baseline.endpoint_url) == (
        "simulator",
        "",
        "",
    )


def test_it_moves_a_version_to_the_judge_model(in_workspace, owner_client, stub):
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    refused = owner_client.post(
        f"/policies/{baseline.pk}/runs-on/", {"provider": "judge", "world": "lettings"}
    )
    assert refused.status_code == 302
    baseline.refresh_from_db()
    assert baseline.provider == "simulator"  # the rubric judge has no model to run on
    owner_client.post(
        "/environment/lettings/judge/",
        {"provider": "vllm", "model": "judge-14b", "endpoint_url": stub.base_url},
    )
    assert World.objects.get(slug="lettings").judge_model == "judge-14b"
    owner_client.post(
        f"/policies/{baseline.pk}/runs-on/", {"provider": "judge", "world": "lettings"}
    )
    baseline.refresh_from_db()
    assert (baseline.provider, baseline.provider_model, baseline.endpoint_url) == (
        "vllm",
        "judge-14b",
        stub.base_url,
    )


def test_it_refuses_a_key_typed_where_a_name_belongs(in_workspace, owner_client, stub):
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    for fields in (
        {"model": "sk-proj-abcdef123456", "endpoint_url": stub.base_url},
        {"model": "m", "endpoint_url": stub.base_url, "api_key_env": "sk-proj-abcdef123456"},
        {"model": "m", "endpoint_url": stub.base_url, "api_key_env": "SECRET_KEY"},
        {"model": "m", "endpoint_url": "http://user:pw@gpu:8000/v1"},
    ):
        owner_client.post(f"/policies/{baseline.pk}/runs-on/", {"provider": "vllm", **fields})
        baseline.refresh_from_db()
        assert baseline.provider == "simulator", fields


def test_it_lets_an_owner_set_the_judge_and_a_manager_only_see_it(
    in_workspace, owner_client, manager_client, reviewer_client, stub
):
    assert reviewer_client.get("/environment/").status_code == 403
    assert (
        reviewer_client.post("/environment/lettings/judge/", {"provider": "rubric"}).status_code
        == 403
    )
    page = manager_client.get("/environment/")
    assert page.status_code == 200
    assert "Environment → Judge" in page.content.decode()
    # Where the judge's model runs is an address the server calls: an owner's setting.
    assert 'name="endpoint_url"' not in page.content.decode()
    judge = {"provider": "vllm", "model": "judge-8b", "endpoint_url": stub.base_url}
    assert manager_client.post("/environment/lettings/judge/", judge).status_code == 403
    assert World.objects.get(slug="lettings").judge_provider == "rubric"
    assert 'name="endpoint_url"' in owner_client.get("/environment/").content.decode()
    owner_client.post("/environment/lettings/judge/", judge)
    assert World.objects.get(slug="lettings").judge_label == "vllm: judge-8b"
    assert manager_client.get("/endpoints/").status_code == 403


def test_it_shows_endpoints_with_cards_state_latency_and_error_rate(endpoint, owner_client, stub):
    job = Job.objects.get(pk=endpoint.job_id)
    from levers9.pools import cards_try_grant

    cards_try_grant(allocation_id=endpoint.card_allocation_id)
    endpoint_serve_finish(job=job, result={"engine": "vllm", "url": stub.base_url, "pid": None})
    Endpoint.objects.filter(pk=endpoint.pk).update(
        request_count=4, error_count=1, latency_total_ms=600.0, latency_last_ms=210.0
    )
    text = page_text(owner_client, "/endpoints/")
    assert "v2 · trained" in text
    assert f"allocation {endpoint.card_allocation_id}" in text
    assert "test-h200 · 2 × H200" in text
    assert "Serving" in text
    assert "200 ms" in text  # 600 ms over the 3 answered requests
    assert "25%" in text
    owner_client.post(f"/endpoints/{endpoint.pk}/release/")
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.RELEASED


def test_it_serves_and_releases_from_the_policies_page(
    trained_version, gpu_pool, serve_trainer, owner_client
):
    owner_client.post(
        f"/policies/{trained_version.pk}/serve/", {"gpu_count": "4", "pool": gpu_pool.name}
    )
    endpoint = Endpoint.objects.get(version=trained_version)
    assert endpoint.card_count == 4
    text = page_text(owner_client, "/policies/")
    assert "Release" in text
    owner_client.post(f"/policies/{trained_version.pk}/release/")
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.RELEASED
    assert "Serve again on" in owner_client.get("/policies/").content.decode()


def test_it_lets_the_owner_release_and_delete_endpoints_in_the_admin(endpoint, owner_client):
    listing = owner_client.get("/admin/policies/endpoint/")
    assert listing.status_code == 200
    assert "v2 · trained" in listing.content.decode()
    assert owner_client.get("/admin/policies/endpoint/add/").status_code == 403
    response = owner_client.post(
        "/admin/policies/endpoint/",
        {"action": "release", "_selected_action": [endpoint.pk]},
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.RELEASED
    owner_client.post(f"/admin/policies/endpoint/{endpoint.pk}/delete/", {"post": "yes"})
    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()


def test_it_frees_the_cards_of_an_endpoint_deleted_in_the_admin(endpoint, owner_client):
    allocation_id = endpoint.card_allocation_id
    owner_client.post(f"/admin/policies/endpoint/{endpoint.pk}/delete/", {"post": "yes"})
    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()
    assert CardAllocation.objects.get(pk=allocation_id).state == CardAllocation.State.RELEASED
    owner_client.get("/policies/")  # the list read
    assert PolicyVersion.objects.get(number=2).status == PolicyVersion.Status.RELEASED


def test_it_keeps_endpoints_from_a_manager_in_the_admin(endpoint, manager_client, reviewer_client):
    assert manager_client.get("/admin/policies/endpoint/").status_code == 403
    assert reviewer_client.get("/admin/policies/policyversion/").status_code == 200
    assert reviewer_client.get("/admin/arena/judgeconnection/").status_code == 403


def test_it_refuses_the_rival_workspace_on_pages_and_in_the_admin(endpoint, outsider_client):
    version_id = endpoint.version_id
    for path in ("/policies/", "/environment/", "/endpoints/"):
        response = outsider_client.get(path)
        assert response.status_code == 302, path
        assert "/login/" in response["Location"]
    for path in (
        f"/policies/{version_id}/release/",
        f"/policies/{version_id}/serve/",
        f"/policies/{version_id}/runs-on/",
        f"/endpoints/{endpoint.pk}/release/",
        "/environment/lettings/judge/",
    ):
        response = outsider_client.post(path, {"provider": "rubric", "gpu_count": "1"})
        assert response.status_code == 302, path
        assert "/login/" in response["Location"]
    for path in (
        "/admin/policies/endpoint/",
        f"/admin/policies/endpoint/{endpoint.pk}/change/",
        f"/admin/policies/policyversion/{version_id}/change/",
        "/admin/arena/judgeconnection/",
    ):
        response = outsider_client.get(path)
        assert response.status_code == 302, path
        assert "/admin/login/" in response["Location"]
    response = outsider_client.post(
        "/admin/policies/endpoint/", {"action": "release", "_selected_action": [endpoint.pk]}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.STARTING


def test_it_says_what_a_trained_version_learned_from_in_words(in_workspace, owner_client):
    from policies.services import version_register

    version_register(
        world=World.objects.get(slug="lettings"),
        name="trained",
        parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
        move_strategy={},
        learned_from={
            "algorithm": "rlhf",
            "preference_version": 2,
            "pairs": {"total": 500, "train": 450, "held_out": 50},
            "held_out_auc": 0.468469191,
            "held_out_accuracy": None,
            "merged_weights": "/models/versions/abc/merged",
            "metrics": {
                "kl": 9.8283e-05,
                "curve": [{"step": 1}],
                "policy_steps": 23,
                "reward_gain": 0.3408,
                "reward_gain_ci": [0.1012, 0.58],
            },
            "reward_model": {"held_out_auc": 0.468469191, "held_out_auc_ci": [0.4101, 0.5322]},
        },
    )
    html = page_text(owner_client, "/policies/")
    assert "<b>picks</b> preference v2" in html
    assert "<b>pairs</b> total 500, train 450, held out 50" in html
    # Each figure with its interval, found beside it or in the reward model's record.
    assert "<b>held out auc</b> 0.468 [0.41, 0.532]" in html
    # (jsonb keeps its own key order, so the metrics are checked one by one)
    metrics = re.search(r"<b>metrics</b> ([^·<]*)", html).group(1)
    assert set(re.split(r", (?=[a-z])", metrics.strip())) == {
        "kl 9.83e-05",
        "policy steps 23",
        "reward gain 0.341 [0.101, 0.58]",
    }
    assert "2 items" not in html  # an interval is never shown as a list
    assert "held out accuracy" not in html  # nothing to say is left out
    assert "{&#x27;" not in html  # no raw dictionaries


def test_a_version_that_did_not_learn_carries_the_mark_on_policies_and_the_api(
    in_workspace, owner_client
):
    from policies.services import version_register

    parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
    reason = "The reward model's held-out pair accuracy is at chance (0.520 [0.430, 0.610])."
    flat = version_register(
        world=World.objects.get(slug="lettings"),
        name="trained",
        parent=parent,
        move_strategy={},
        learned_from={"algorithm": "rlhf", "did_not_learn": [reason]},
    )
    learned = version_register(
        world=World.objects.get(slug="lettings"),
        name="trained",
        parent=parent,
        move_strategy={},
        learned_from={"did_not_learn": []},
    )
    html = page_text(owner_client, "/policies/")
    assert html.count('data-mark="did-not-learn"') == 2  # the row and its Make live form
    assert "at chance (0.520 [0.430, 0.610])" in html
    rows = {row["id"]: row for row in owner_client.get("/api/rl/policies/").json()["results"]}
    assert rows[flat.pk]["did_not_learn"] == [reason]
    assert rows[learned.pk]["did_not_learn"] == []


def test_it_sums_up_what_each_version_learned_from_in_one_line(in_workspace, owner_client):
    """ "Learned from" reads as a sentence, each measured figure with its interval; the full
    settings stay one click away."""
    from datetime import timedelta

    from django.utils import timezone

    from levers9.jobs.models import Job
    from policies.selectors import learned_summary
    from policies.services import version_register

    lettings = World.objects.get(slug="lettings")
    baseline = PolicyVersion.objects.get(world=lettings, number=1)
    now = timezone.now()
    # The job that made it ran 2 minutes: the version's record names it.
    job = Job.objects.create(
        kind="train",
        trainer="q-learning-online",
        workspace_schema=in_workspace.schema_name,
        pool_name="cpu",
        card_type="cpu",
        started_at=now - timedelta(seconds=125),
        finished_at=now,
    )
    moves = version_register(
        world=lettings,
        name="trained",
        parent=baseline,
        move_strategy={},
        learned_from={
            "job": job.pk,
            "algorithm": "q-learning-online",
            "seed": 7,
            "knobs": {"episodes": 4000},
            "summary": {"mean_fraction_of_optimum": 0.934},
        },
    )
    wording = version_register(
        world=lettings,
        name="trained",
        parent=moves,
        move_strategy={},
        learned_from={
            "algorithm": "rlhf",
            "base": "SmolLM2-135M",
            "preference_version": 3,
            "pairs": {"total": 200, "train": 180, "held_out": 20},
            "seed": 0,
            "reward_model": {"held_out_accuracy": 0.62, "held_out_accuracy_ci": [0.55, 0.70]},
            "metrics": {"reward_gain": 0.3408, "reward_gain_ci": [0.1012, 0.58]},
        },
    )
    assert learned_summary(baseline) == "Hand-written start: scripted move rules and wording."
    assert learned_summary(wording) == (
        "RLHF on SmolLM2-135M from preference v3 (200 pairs), seed 0, from v2; reward model "
        "held-out accuracy 0.62 [0.55, 0.70]; reward gain 0.34 [0.10, 0.58]"
    )
    html = page_text(owner_client, "/policies/?world=lettings")
    assert (
        "Q-learning on Lettings&#x27;s simulator, 2 min, seed 7, from v1; reaches 93% of the "
        "best return on its scenarios"
    ) in html
    assert "held-out accuracy 0.62 [0.55, 0.70]" in html
    assert "every setting" in html  # the full settings, folded
