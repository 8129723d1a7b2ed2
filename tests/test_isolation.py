"""A second workspace is refused everywhere: API (session and token), pages and admin."""

from __future__ import annotations

import json

import pytest
from django_tenants.utils import schema_context

from arena.models import Call, World
from arena.services.calls import calls_import
from tests.conftest import api_token, client_for, token_client
from tests.recorded_calls import two_turn_call

SECRET_CALL = two_turn_call("acme-secret-call")


@pytest.fixture
def acme_call(workspace):
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        calls_import(world=world, text=json.dumps(SECRET_CALL), source="test", convert=True)
        return Call.objects.get(external_id="acme-secret-call").pk


def test_it_shows_the_owner_their_own_calls(owner_client, acme_call):
    response = owner_client.get("/api/rl/calls/")
    assert response.status_code == 200
    assert [row["external_id"] for row in response.json()["results"]] == ["acme-secret-call"]
    detail = owner_client.get(f"/api/rl/calls/{acme_call}/").json()
    assert detail["turns"][1]["text"] == "Hello, I saw the flat on Elm Street."


def test_it_refuses_a_session_of_another_workspace_on_the_api(outsider_client, acme_call):
    assert outsider_client.get("/api/rl/calls/").status_code in {401, 403}
    assert outsider_client.get(f"/api/rl/calls/{acme_call}/").status_code in {401, 403}


def test_it_refuses_a_token_of_another_workspace(workspace, other_workspace, acme_call):
    rival_token = api_token(other_workspace, "owner@rival.test")
    client = token_client(workspace, rival_token)
    assert client.get("/api/rl/calls/").status_code == 401
    # The same token on its own workspace works and sees none of acme's calls.
    own = token_client(other_workspace, rival_token)
    response = own.get("/api/rl/calls/")
    assert response.status_code == 200
    assert response.json()["count"] == 0
    assert own.get(f"/api/rl/calls/{acme_call}/").status_code == 404


def test_it_serves_a_token_of_this_workspace(workspace, acme_call):
    client = token_client(workspace, api_token(workspace, "owner@acme.test"))
    me = client.get("/api/rl/me/").json()
    assert me == {
        "username": "owner@acme.test",
        "workspace": "acme",
        "role": "owner",
        "can": me["can"],
    }
    assert client.get("/api/rl/calls/").json()["count"] == 1


def test_it_refuses_another_workspace_in_the_admin(outsider_client, acme_call):
    response = outsider_client.get(f"/admin/arena/call/{acme_call}/change/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_it_shows_the_owner_the_call_in_the_admin(owner_client, acme_call):
    response = owner_client.get("/admin/arena/call/")
    assert response.status_code == 200
    assert b"acme-secret-call" in response.content


def test_it_refuses_another_workspace_on_pages(outsider_client, acme_call):
    response = outsider_client.get(f"/calls/{acme_call}/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_it_does_not_show_the_task_queue_or_workspaces_in_a_workspace_admin(owner_client):
    index = owner_client.get("/admin/")
    assert index.status_code == 200
    assert b"Workspaces" not in index.content
    assert b"django_q" not in index.content
    assert owner_client.get("/admin/django_q/success/").status_code in {302, 403, 404}
    assert owner_client.get("/admin/levers9/workspace/").status_code in {302, 403, 404}


def test_it_does_not_let_a_workspace_owner_into_the_public_admin(workspace):
    client = client_for(workspace, "owner@acme.test")
    client.defaults["HTTP_HOST"] = "localhost"
    response = client.get("/admin/levers9/workspace/")
    assert response.status_code == 302
