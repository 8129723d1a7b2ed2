"""The users API for integrations (/api/rl/users/, /api/rl/invitations/): the owner lists,
invites, changes a role and removes; bad input is a 4xx naming the field; reviewers, managers
and another workspace are refused."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context

from levers9.roles import user_role
from tests.conftest import api_token, client_for, make_user, token_client

NEW_PASSWORD = "a-long-fresh-passphrase"


def _user(workspace, email: str):
    with schema_context(workspace.schema_name):
        return get_user_model().objects.filter(username=email).first()


def _invite(client, email: str = "nina@acme.test", role: str = "reviewer"):
    return client.post(
        "/api/rl/users/invite/", {"email": email, "role": role}, content_type="application/json"
    )


def test_the_owner_lists_users_with_their_roles(owner_client, workspace):
    make_user(workspace, "rita@acme.test", "reviewer")
    response = owner_client.get("/api/rl/users/")
    assert response.status_code == 200
    roles = {row["email"]: row["role"] for row in response.json()["results"]}
    assert roles == {"owner@acme.test": "owner", "rita@acme.test": "reviewer"}


def test_the_owner_invites_and_the_link_works_once(owner_client, workspace):
    response = _invite(owner_client, role="manager")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["invitation"]["email"] == "nina@acme.test"
    assert body["invitation"]["role"] == "manager"
    assert "token" not in body["invitation"]
    assert "token_hash" not in body["invitation"]
    link = body["invitation_link"]
    assert link.startswith("http://acme.localhost/invite/")
    pending = owner_client.get("/api/rl/invitations/").json()["results"]
    assert [row["email"] for row in pending] == ["nina@acme.test"]
    path = link.split("acme.localhost", 1)[1]
    invitee = client_for(workspace)
    form = {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    assert invitee.post(path, form).status_code == 302
    assert client_for(workspace).post(path, form).status_code == 410
    assert user_role(_user(workspace, "nina@acme.test")) == "manager"
    assert owner_client.get("/api/rl/invitations/").json()["results"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "not-an-address", "role": "reviewer"}, "email"),
        ({"email": "owner@acme.test", "role": "reviewer"}, "email"),
        ({"email": "nina@acme.test", "role": "admin"}, "role"),
        ({"role": "reviewer"}, "email"),
        ({"email": "nina@acme.test"}, "role"),
    ],
)
def test_a_bad_invitation_is_a_400_naming_the_field(owner_client, body, field):
    response = owner_client.post("/api/rl/users/invite/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]


def test_the_owner_changes_a_role_and_removes_a_user(owner_client, workspace):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    changed = owner_client.patch(
        f"/api/rl/users/{rita.pk}/", {"role": "owner"}, content_type="application/json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["role"] == "owner"
    bad = owner_client.patch(
        f"/api/rl/users/{rita.pk}/", {"role": "boss"}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert "role" in bad.json()
    assert owner_client.delete(f"/api/rl/users/{rita.pk}/").status_code == 204
    assert not _user(workspace, "rita@acme.test").is_active
    listed = owner_client.get("/api/rl/users/").json()["results"]
    assert "rita@acme.test" not in {row["email"] for row in listed}


def test_the_last_owner_is_protected(owner_client, workspace):
    owner = _user(workspace, "owner@acme.test")
    demoted = owner_client.patch(
        f"/api/rl/users/{owner.pk}/", {"role": "manager"}, content_type="application/json"
    )
    assert demoted.status_code == 409
    assert "last owner" in " ".join(demoted.json()["role"])
    removed = owner_client.delete(f"/api/rl/users/{owner.pk}/")
    assert removed.status_code == 409
    assert "last owner" in removed.json()["detail"]
    assert user_role(_user(workspace, "owner@acme.test")) == "owner"


def test_the_owner_withdraws_an_invitation(owner_client):
    invitation_id = _invite(owner_client).json()["invitation"]["id"]
    assert owner_client.delete(f"/api/rl/invitations/{invitation_id}/").status_code == 204
    assert owner_client.get("/api/rl/invitations/").json()["results"] == []


def test_reviewers_and_managers_get_403(reviewer_client, manager_client, workspace):
    rita = _user(workspace, "rita@acme.test")
    for client in (reviewer_client, manager_client):
        assert client.get("/api/rl/users/").status_code == 403
        assert client.get("/api/rl/invitations/").status_code == 403
        assert _invite(client).status_code == 403
        patched = client.patch(
            f"/api/rl/users/{rita.pk}/", {"role": "owner"}, content_type="application/json"
        )
        assert patched.status_code == 403
        assert client.delete(f"/api/rl/users/{rita.pk}/").status_code == 403
    assert user_role(_user(workspace, "rita@acme.test")) == "reviewer"


def test_another_workspace_sees_and_changes_nothing(workspace, other_workspace):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    rival_token = api_token(other_workspace, "owner@rival.test")
    on_our_host = token_client(workspace, rival_token)
    assert on_our_host.get("/api/rl/users/").status_code == 401
    assert _invite(on_our_host).status_code == 401
    assert on_our_host.delete(f"/api/rl/users/{rita.pk}/").status_code == 401
    on_their_host = token_client(other_workspace, rival_token)
    listed = on_their_host.get("/api/rl/users/").json()["results"]
    assert {row["email"] for row in listed} == {"owner@rival.test"}
    assert on_their_host.delete(f"/api/rl/users/{rita.pk}/").status_code == 404
    invitation_id = _invite(client_for(workspace, "owner@acme.test")).json()["invitation"]["id"]
    assert on_their_host.delete(f"/api/rl/invitations/{invitation_id}/").status_code == 404
    assert _user(workspace, "rita@acme.test").is_active
