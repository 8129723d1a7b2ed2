"""The registry's API: release, serve (clear 4xx), runs-on, endpoints; roles; the rival
workspace is refused on every path."""

from __future__ import annotations

from levers9.models import CardAllocation
from policies.models import Endpoint, PolicyVersion
from tests.conftest import api_token, token_client


def _post(client, path, body=None):
    return client.post(path, body or {}, content_type="application/json")


def test_it_lists_versions_with_lineage_to_a_reviewer(trained_version, reviewer_client):
    rows = reviewer_client.get("/api/rl/policies/").json()["results"]
    trained = next(row for row in rows if row["number"] == trained_version.number)
    assert trained["lineage"] == ["v2 · trained", "v1 · baseline"]
    assert trained["provider"] == "trained"
    assert trained["learned_from"]["algorithm"] == "dpo"
    assert trained["status"] in ("starting", "released")


def test_it_serves_releases_and_serves_again_over_the_api(
    trained_version, gpu_pool, serve_trainer, owner_client
):
    number = trained_version.pk
    served = _post(owner_client, f"/api/rl/policies/{number}/serve", {"gpu_count": 4})
    assert served.status_code == 202, served.content
    body = served.json()
    assert (body["state"], body["card_count"], body["pool_name"]) == ("starting", 4, "test-h200")
    again = _post(owner_client, f"/api/rl/policies/{number}/serve/", {"gpu_count": 4})
    assert again.status_code == 409
    assert "already starting" in again.json()["detail"]

    released = _post(owner_client, f"/api/rl/policies/{number}/release")
    assert released.status_code == 200, released.content
    assert released.json()["status"] == "released"
    assert CardAllocation.objects.get(pk=body["card_allocation_id"]).state == "released"
    assert _post(owner_client, f"/api/rl/policies/{number}/release").status_code == 409

    served = _post(owner_client, f"/api/rl/policies/{number}/serve/", {"gpu_count": 2})
    assert served.status_code == 202
    assert served.json()["card_allocation_id"] != body["card_allocation_id"]


def test_it_answers_bad_serve_requests_with_a_clear_4xx(
    trained_version, gpu_pool, serve_trainer, owner_client
):
    path = f"/api/rl/policies/{trained_version.pk}/serve"
    for body in ({"gpu_count": 0}, {"gpu_count": "four"}, {}):
        response = _post(owner_client, path, body)
        assert response.status_code == 400, body
        assert "gpu_count" in response.json()
    too_many = _post(owner_client, path, {"gpu_count": 5})
    assert too_many.status_code == 400
    assert "test-h200 has 4 card(s)" in too_many.json()["detail"]
    unknown = _post(owner_client, path, {"gpu_count": 1, "pool": "atlantis"})
    assert unknown.status_code == 400
    assert "atlantis" in unknown.json()["detail"]
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    not_trained = _post(owner_client, f"/api/rl/policies/{baseline.pk}/serve", {"gpu_count": 1})
    assert not_trained.status_code == 409
    assert _post(owner_client, "/api/rl/policies/99999/serve", {"gpu_count": 1}).status_code == 404


def test_it_lets_only_the_owner_release_and_serve(
    trained_version, gpu_pool, manager_client, reviewer_client
):
    for client in (manager_client, reviewer_client):
        for slash in ("", "/"):
            path = f"/api/rl/policies/{trained_version.pk}/serve{slash}"
            response = _post(client, path, {"gpu_count": 1})
            assert response.status_code == 403, path
            assert "owner role" in response.json()["detail"]
            path = f"/api/rl/policies/{trained_version.pk}/release{slash}"
            assert _post(client, path).status_code == 403, path
            path = f"/api/rl/policies/{trained_version.pk}/runs-on{slash}"
            assert _post(client, path, {"provider": "simulator"}).status_code == 403, path
        assert client.get("/api/rl/endpoints/").status_code == 403
    assert not Endpoint.objects.exists()


def test_it_moves_a_version_over_the_api(in_workspace, owner_client, stub):
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    response = _post(
        owner_client,
        f"/api/rl/policies/{baseline.pk}/runs-on/",
        {"provider": "vllm", "model": "Qwen/Qwen3-8B", "endpoint_url": stub.base_url},
    )
    assert response.status_code == 200, response.content
    assert (response.json()["provider"], response.json()["provider_model"]) == (
        "vllm",
        "Qwen/Qwen3-8B",
    )
    bad = _post(
        owner_client,
        f"/api/rl/policies/{baseline.pk}/runs-on",
        {"provider": "vllm", "model": "m", "endpoint_url": "gopher://x"},
    )
    assert bad.status_code == 400
    back = _post(owner_client, f"/api/rl/policies/{baseline.pk}/runs-on", {"provider": "simulator"})
    assert back.json()["provider"] == "simulator"


def test_it_lists_endpoints_to_the_owner(trained_version, gpu_pool, serve_trainer, owner_client):
    _post(owner_client, f"/api/rl/policies/{trained_version.pk}/serve", {"gpu_count": 3})
    [row] = owner_client.get("/api/rl/endpoints/").json()["results"]
    assert (row["version"], row["card_count"], row["state"]) == (2, 3, "starting")
    assert row["error_rate"] is None
    released = _post(owner_client, f"/api/rl/endpoints/{row['id']}/release/")
    assert released.status_code == 200
    assert released.json()["state"] == "released"


def test_it_refuses_the_rival_workspace_on_every_api_path(
    trained_version, gpu_pool, serve_trainer, outsider_client, workspace, other_workspace
):
    version_id = trained_version.pk
    rival_by_token = token_client(workspace, api_token(other_workspace, "owner@rival.test"))
    for client in (outsider_client, rival_by_token):
        assert client.get("/api/rl/policies/").status_code in {401, 403}
        assert client.get(f"/api/rl/policies/{version_id}/").status_code in {401, 403}
        assert client.get("/api/rl/endpoints/").status_code in {401, 403}
        for action, body in (
            ("serve", {"gpu_count": 1}),
            ("release", {}),
            ("runs-on", {"provider": "simulator"}),
        ):
            for slash in ("", "/"):
                path = f"/api/rl/policies/{version_id}/{action}{slash}"
                assert _post(client, path, body).status_code in {401, 403}, path
    assert not Endpoint.objects.exists()
