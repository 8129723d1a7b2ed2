"""What an owner types for an endpoint (Runs on, Environment → Judge) is read before anything
is resolved or called: an address that cannot be parsed or is too long, or a key variable name
too long, is a 400 naming the field over the API and a form error on the page, never a 500.
Where a judge's model runs is an owner's setting. A key variable is read only in the workspace
whose slug it carries, at save time and again when the key is read."""

from __future__ import annotations

import socket

import pytest
from django_tenants.utils import schema_context

from arena.models import JudgeConnection, World
from levers9.providers import (
    ModelTarget,
    ProviderUnavailable,
    key_env_workspace,
    provider_for,
)
from policies.models import PolicyVersion

MALFORMED = [
    "http://1.1.1.1:99999/v1",
    "http://1.1.1.1:-1/v1",
    "http://[::1",
    "http://[1.1.1.1]/v1",
    "http://127.0.0.1:9/v1\x00",  # the database refuses a NUL outright
    "http://127.0.0.1:9/v\n1",
]
TOO_LONG = "http://gpu.example/v1/" + "x" * 190  # 212 characters; the column holds 200


@pytest.fixture
def no_lookups(monkeypatch):
    """Every name lookup attempted, none made: a field is read before the network is used."""
    lookups: list[str] = []

    def getaddrinfo(host, *args, **kwargs):
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no lookups in this test")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def _baseline() -> PolicyVersion:
    return PolicyVersion.objects.filter(number=1).order_by("pk").first()


def _runs_on(client, version: PolicyVersion, **fields):
    return client.post(
        f"/api/rl/policies/{version.pk}/runs-on",
        {"provider": "vllm", "model": "m", **fields},
        content_type="application/json",
    )


def _names_field(body: dict, field: str) -> bool:
    # In words ({"detail": "endpoint_url: ..."}) or DRF's way ({"endpoint_url": [...]}).
    return field in body or str(body.get("detail", "")).startswith(field)


@pytest.mark.parametrize("url", MALFORMED)
def test_it_answers_a_malformed_address_with_a_400_naming_the_field(
    in_workspace, owner_client, no_lookups, url
):
    version = _baseline()
    response = _runs_on(owner_client, version, endpoint_url=url)
    assert response.status_code == 400
    assert _names_field(response.json(), "endpoint_url")
    assert no_lookups == []
    version.refresh_from_db()
    assert version.provider == "simulator"


def test_it_answers_an_address_over_the_column_with_a_400_naming_the_limit(
    in_workspace, owner_client, no_lookups
):
    response = _runs_on(owner_client, _baseline(), endpoint_url=TOO_LONG)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("endpoint_url")
    assert "200" in detail
    assert no_lookups == []


def test_it_answers_a_key_variable_name_over_the_column_with_a_400(in_workspace, owner_client):
    name = "LEVERS9_ENDPOINT_ACME_" + "G" * 60 + "_KEY"
    response = _runs_on(
        owner_client, _baseline(), endpoint_url="http://127.0.0.1:9/v1", api_key_env=name
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("api_key_env")
    assert "64" in response.json()["detail"]


@pytest.mark.parametrize("url", [*MALFORMED, TOO_LONG])
def test_the_judge_form_shows_a_malformed_address_as_a_form_error(
    in_workspace, owner_client, no_lookups, url
):
    response = owner_client.post(
        "/environment/lettings/judge/",
        {"provider": "vllm", "model": "judge-8b", "endpoint_url": url},
        follow=True,
    )
    page = response.content.decode()
    if "\x00" in url:
        # Refused before any view, as every field with a NUL is (levers9.middleware): a 400
        # page naming the field.
        assert response.status_code == 400
    else:
        assert response.status_code == 200
        assert 'class="messages"' in page
    assert "endpoint_url" in page
    assert no_lookups == []
    assert not JudgeConnection.objects.exists()
    assert World.objects.get(slug="lettings").judge_provider == "rubric"


def test_a_manager_cannot_set_where_the_judge_runs(
    in_workspace, manager_client, owner_client, stub
):
    judge = {"provider": "vllm", "model": "judge-8b", "endpoint_url": stub.base_url}
    assert manager_client.post("/environment/lettings/judge/", judge).status_code == 403
    assert not JudgeConnection.objects.exists()
    # Nor move an agent onto an address over the API (Runs on is the owner's too).
    response = _runs_on(manager_client, _baseline(), endpoint_url=stub.base_url)
    assert response.status_code == 403
    assert owner_client.post("/environment/lettings/judge/", judge).status_code == 302
    assert JudgeConnection.objects.get().endpoint_url == stub.base_url


# --- key variables belong to the workspace whose slug they carry -----------------------------


def test_an_owner_cannot_name_another_workspaces_key_variable(in_workspace, owner_client, stub):
    version = _baseline()
    for name in ("LEVERS9_ENDPOINT_RIVAL_GPU_KEY", "LEVERS9_ENDPOINT_GPU_KEY"):
        response = _runs_on(owner_client, version, endpoint_url=stub.base_url, api_key_env=name)
        assert response.status_code == 400, name
        assert response.json()["detail"].startswith("api_key_env"), name
        assert "LEVERS9_ENDPOINT_ACME_<NAME>_KEY" in response.json()["detail"]
    version.refresh_from_db()
    assert version.api_key_env == ""
    judge = owner_client.post(
        "/environment/lettings/judge/",
        {
            "provider": "vllm",
            "model": "judge-8b",
            "endpoint_url": stub.base_url,
            "api_key_env": "LEVERS9_ENDPOINT_RIVAL_GPU_KEY",
        },
    )
    assert judge.status_code == 302
    assert not JudgeConnection.objects.exists()
    own = _runs_on(
        owner_client,
        version,
        endpoint_url=stub.base_url,
        api_key_env="LEVERS9_ENDPOINT_ACME_GPU_KEY",
    )
    assert own.status_code == 200
    assert own.json()["api_key_env"] == "LEVERS9_ENDPOINT_ACME_GPU_KEY"


def test_another_workspaces_key_is_never_read_even_if_saved_before(
    in_workspace, other_workspace, stub, monkeypatch
):
    # A name saved before keys were scoped (or written past the checks): never read here.
    planted = "rival-secret-7f3a9c"
    monkeypatch.setenv("LEVERS9_ENDPOINT_RIVAL_GPU_KEY", planted)
    target = ModelTarget(
        "vllm", model="m", base_url=stub.base_url, api_key_env="LEVERS9_ENDPOINT_RIVAL_GPU_KEY"
    )
    usable, reason = provider_for(target).available()
    assert not usable
    assert "not this workspace's" in reason
    with pytest.raises(ProviderUnavailable):
        provider_for(target).reply([{"role": "user", "content": "hello"}])
    assert stub.requests == []
    # In its own workspace it is read and sent.
    with schema_context(other_workspace.schema_name):
        provider_for(target).reply([{"role": "user", "content": "hello"}])
    assert stub.requests[0].headers["authorization"] == f"Bearer {planted}"


def test_a_key_variable_is_the_workspace_with_the_longest_slug_it_carries():
    slugs = ["acme", "acme-b", "rival"]
    assert key_env_workspace("LEVERS9_ENDPOINT_ACME_GPU_KEY", slugs) == "acme"
    # acme-b's, never acme's "B_GPU" key.
    assert key_env_workspace("LEVERS9_ENDPOINT_ACME_B_GPU_KEY", slugs) == "acme-b"
    assert key_env_workspace("LEVERS9_ENDPOINT_GPU_KEY", slugs) == ""
    assert key_env_workspace("LEVERS9_ENDPOINT_ACMEX_KEY", slugs) == ""
