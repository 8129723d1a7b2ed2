"""The owner's Users page: invite by e-mail with a role (the link is shown to copy, no e-mail is
sent), change a role, remove; the invitation link's page; reviewers, managers and another
workspace's owner are refused."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context

from levers9.roles import user_role
from tests.conftest import PASSWORD, client_for, make_user
from tests.pages import page_text

NEW_PASSWORD = "a-long-fresh-passphrase"
LINK = re.compile(r"https?://acme\.localhost/invite/([A-Za-z0-9_-]{40,})/")


def _invite(client, email: str = "nina@acme.test", role: str = "manager"):
    return client.post("/users/invite/", {"email": email, "role": role})


def _link(response) -> str:
    found = LINK.search(response.content.decode())
    assert found, response.content.decode()[:2000]
    return found.group(0)


def _user(workspace, email: str):
    with schema_context(workspace.schema_name):
        return get_user_model().objects.filter(username=email).first()


def test_the_header_links_the_users_page_for_owners_only(owner_client, reviewer_client):
    assert 'href="/users/"' in owner_client.get("/").content.decode()
    assert 'href="/users/"' not in reviewer_client.get("/").content.decode()


def test_the_page_lists_users_with_their_roles(owner_client, workspace):
    make_user(workspace, "rita@acme.test", "reviewer")
    text = page_text(owner_client, "/users/")
    assert "owner@acme.test" in text
    assert "rita@acme.test" in text
    assert 'value="reviewer" selected' in text


def test_the_owner_invites_and_the_link_signs_the_invitee_in_once(owner_client, workspace):
    response = _invite(owner_client)
    assert response.status_code == 200
    link = _link(response)
    assert "nina@acme.test" in owner_client.get("/users/").content.decode()  # pending
    invitee = client_for(workspace)
    path = link.split("acme.localhost", 1)[1]
    form = invitee.get(path)
    assert form.status_code == 200
    assert "nina@acme.test" in form.content.decode()
    accepted = invitee.post(path, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert accepted.status_code == 302
    assert invitee.get("/api/rl/me/").json() == {
        "username": "nina@acme.test",
        "workspace": "acme",
        "role": "manager",
        "can": "Freeze preferences, train and evaluate versions.",
    }
    again = client_for(workspace).get(path)
    assert again.status_code == 410
    assert "already used" in again.content.decode()
    # The new user signs in with the password they chose.
    client_for(workspace).post("/login/", {"username": "nina@acme.test", "password": NEW_PASSWORD})
    assert user_role(_user(workspace, "nina@acme.test")) == "manager"


def test_a_weak_or_mismatched_password_is_refused_on_the_form(owner_client, workspace):
    path = _link(_invite(owner_client)).split("acme.localhost", 1)[1]
    invitee = client_for(workspace)
    weak = invitee.post(path, {"password1": "password", "password2": "password"})
    assert weak.status_code == 200
    assert "too common" in weak.content.decode()
    mismatched = invitee.post(path, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD + "x"})
    assert "do not match" in mismatched.content.decode()
    assert _user(workspace, "nina@acme.test") is None


def test_an_unknown_or_withdrawn_link_says_so(owner_client, workspace):
    unknown = client_for(workspace).get("/invite/" + "x" * 43 + "/")
    assert unknown.status_code == 404
    assert "not a working invitation" in unknown.content.decode()
    path = _link(_invite(owner_client)).split("acme.localhost", 1)[1]
    with schema_context(workspace.schema_name):
        from levers9.users.models import Invitation

        invitation_id = Invitation.objects.get(email="nina@acme.test").pk
    assert owner_client.post(f"/users/invitations/{invitation_id}/revoke/").status_code == 302
    withdrawn = client_for(workspace).get(path)
    assert withdrawn.status_code == 410
    assert "withdrawn" in withdrawn.content.decode()


def test_an_invitation_of_one_workspace_does_not_work_on_another(owner_client, other_workspace):
    path = _link(_invite(owner_client)).split("acme.localhost", 1)[1]
    rival = client_for(other_workspace)
    assert rival.get(path).status_code == 404
    refused = rival.post(path, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert refused.status_code == 404
    assert _user(other_workspace, "nina@acme.test") is None


@pytest.mark.parametrize(
    ("email", "role", "field", "message"),
    [
        ("not-an-address", "manager", "email", "valid email address"),
        ("owner@acme.test", "manager", "email", "already has an account"),
        ("nina@acme.test", "admin", "role", "reviewer, manager or owner"),
    ],
)
def test_a_bad_invitation_is_refused_naming_the_field(owner_client, email, role, field, message):
    response = _invite(owner_client, email, role)
    assert response.status_code == 400
    text = response.content.decode()
    assert f'id="{field}-error"' in text
    assert message in text
    assert f'value="{email}"' in text  # what was typed is kept
    assert not LINK.search(text)


def test_the_owner_changes_a_role_and_removes_a_user(owner_client, workspace):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    changed = owner_client.post(f"/users/{rita.pk}/role/", {"role": "manager"})
    assert changed.status_code == 302
    assert user_role(_user(workspace, "rita@acme.test")) == "manager"
    assert owner_client.post(f"/users/{rita.pk}/remove/").status_code == 302
    assert not _user(workspace, "rita@acme.test").is_active
    page = page_text(owner_client, "/users/")
    assert f'data-user="{rita.pk}"' not in page  # no longer among the users
    assert "rita@acme.test</li>" in page.split("<h2>Removed</h2>")[1]
    signin = client_for(workspace).post(
        "/login/", {"username": "rita@acme.test", "password": PASSWORD}
    )
    assert signin.status_code == 200  # the form again: no session


def test_the_last_owner_cannot_step_down_on_the_page(owner_client, workspace):
    owner = _user(workspace, "owner@acme.test")
    demoted = owner_client.post(f"/users/{owner.pk}/role/", {"role": "reviewer"}, follow=True)
    assert "last owner" in demoted.content.decode()
    removed = owner_client.post(f"/users/{owner.pk}/remove/", follow=True)
    assert "last owner" in removed.content.decode()
    assert user_role(_user(workspace, "owner@acme.test")) == "owner"


def test_reviewers_and_managers_are_refused(reviewer_client, manager_client, workspace):
    rita = _user(workspace, "rita@acme.test")
    for client in (reviewer_client, manager_client):
        assert client.get("/users/").status_code == 403
        assert _invite(client).status_code == 403
        assert client.post(f"/users/{rita.pk}/role/", {"role": "owner"}).status_code == 403
        assert client.post(f"/users/{rita.pk}/remove/").status_code == 403
    assert user_role(_user(workspace, "rita@acme.test")) == "reviewer"


def test_another_workspaces_owner_sees_and_changes_nothing(
    outsider_client, workspace, other_workspace
):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    assert outsider_client.get("/users/").status_code in {302, 403}
    assert _invite(outsider_client).status_code in {302, 403}
    assert outsider_client.post(f"/users/{rita.pk}/remove/").status_code in {302, 403}
    assert _user(workspace, "rita@acme.test").is_active
    # On their own host, our user's id is not theirs to change.
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.post(f"/users/{rita.pk}/remove/").status_code == 404
    assert "rita@acme.test" not in rival.get("/users/").content.decode()
    assert _user(workspace, "rita@acme.test").is_active


def test_the_admin_lists_invitations_for_owners_only(owner_client, reviewer_client):
    _invite(owner_client)
    listed = owner_client.get("/admin/users/invitation/")
    assert listed.status_code == 200
    assert "nina@acme.test" in listed.content.decode()
    assert reviewer_client.get("/admin/users/invitation/").status_code == 403
