"""API tokens in the owner's admin: shown once, in the message after creation; never in the
list, the change form, a link or the recent actions."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context
from rest_framework.authtoken.models import Token

from tests.conftest import make_user, token_client

LIST = "/admin/authtoken/tokenproxy/"


@pytest.fixture
def reviewer(workspace):
    return make_user(workspace, "reviewer@acme.test", "reviewer")


@pytest.fixture
def reviewer_token(workspace, reviewer) -> str:
    with schema_context(workspace.schema_name):
        return Token.objects.create(user=reviewer).key


def test_it_does_not_list_raw_tokens(owner_client, reviewer_token):
    response = owner_client.get(LIST)
    assert response.status_code == 200
    assert b"reviewer@acme.test" in response.content
    assert reviewer_token.encode() not in response.content


def test_it_does_not_show_a_token_on_its_change_or_delete_page(
    owner_client, reviewer, reviewer_token
):
    listing = owner_client.get(LIST).content.decode()
    change_links = re.findall(r'href="(/admin/authtoken/tokenproxy/[^"]+/change/)"', listing)
    assert change_links == [f"{LIST}{reviewer.pk}/change/"]
    for page in (change_links[0], f"{LIST}{reviewer.pk}/delete/"):
        response = owner_client.get(page)
        assert response.status_code == 200, page
        assert reviewer_token.encode() not in response.content, page


def test_it_shows_a_new_token_once_in_the_message(owner_client, workspace, reviewer):
    response = owner_client.post(f"{LIST}add/", {"user": reviewer.pk}, follow=True)
    assert response.status_code == 200
    with schema_context(workspace.schema_name):
        key = Token.objects.get(user=reviewer).key
    assert response.content.count(key.encode()) == 1
    assert b"not shown again" in response.content
    for page in (LIST, "/admin/", f"{LIST}{reviewer.pk}/change/", f"{LIST}{reviewer.pk}/history/"):
        again = owner_client.get(page)
        assert again.status_code == 200, page
        assert key.encode() not in again.content, page


def test_it_logs_a_deletion_without_the_key(owner_client, workspace, reviewer, reviewer_token):
    response = owner_client.post(f"{LIST}{reviewer.pk}/delete/", {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert reviewer_token.encode() not in response.content
    with schema_context(workspace.schema_name):
        assert not Token.objects.filter(user=reviewer).exists()
        from django.contrib.admin.models import LogEntry

        logged = list(LogEntry.objects.values_list("object_id", "object_repr", "change_message"))
        assert all(reviewer_token not in " ".join(map(str, row)) for row in logged)
        assert get_user_model().objects.filter(pk=reviewer.pk).exists()


def test_it_refuses_another_workspace_the_token_admin(outsider_client, reviewer_token):
    response = outsider_client.get(LIST)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_api_still_authenticates_with_the_token(workspace, reviewer_token):
    client = token_client(workspace, reviewer_token)
    assert client.get("/api/rl/me/").json()["username"] == "reviewer@acme.test"
