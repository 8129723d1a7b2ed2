"""A signed-in user with no role in a workspace reads nothing of it through the API, as the
pages refuse them: every GET of the OpenAPI schema is walked with such a user's session and
token, and only the operations that tell a user who they are answer.

The walk reads the schema itself, so an operation added later is walked too."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context
from rest_framework.authtoken.models import Token

from tests.conftest import PASSWORD, client_for, token_client
from tests.test_cross_tenant_walk import MARKER, _operations, _url, acme_ids  # noqa: F401

NOBODY = "nobody@acme.test"
# Who am I and what may I do: answering it is the point, and it shows no workspace data.
OPEN_TO_ANY_USER = {"/api/rl/me/"}


@pytest.fixture
def roleless_user(workspace):
    from levers9.services import workspace_user_create

    with schema_context(workspace.schema_name):
        user = workspace_user_create(email=NOBODY, password=PASSWORD, role="reviewer")
        user.groups.clear()
        token = Token.objects.get_or_create(user=user)[0].key
    return token


def _reads(workspace) -> list[str]:
    return [path for method, path, _ in _operations(workspace) if method == "get"]


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_user_has_no_role_and_the_pages_refuse_them(workspace, roleless_user):
    from levers9.roles import user_role

    with schema_context(workspace.schema_name):
        assert user_role(get_user_model().objects.get(username=NOBODY)) is None
    assert client_for(workspace, NOBODY).get("/duel/").status_code == 403


@pytest.mark.parametrize("auth", ["session", "token"])
def test_no_read_answers_a_user_without_a_role(workspace, roleless_user, acme_ids, auth):  # noqa: F811
    if auth == "session":
        client = client_for(workspace, NOBODY)
    else:
        client = token_client(workspace, roleless_user)
    answered = {}
    for path in _reads(workspace):
        if path in OPEN_TO_ANY_USER:
            continue
        response = client.get(_url(path, acme_ids))
        if response.status_code != 403 or MARKER.encode() in _body(response):
            answered[path] = response.status_code
    assert answered == {}
    # The one read left open tells them why the rest is refused.
    me = client.get("/api/rl/me/")
    assert me.status_code == 200
    assert me.json()["role"] is None


def test_the_same_reads_answer_a_reviewer(workspace, acme_ids):  # noqa: F811
    """The walk above can fail: with a role, the same reads of a call and a world answer."""
    client = client_for(workspace, "owner@acme.test")
    assert client.get(_url("/api/rl/calls/{id}/", acme_ids)).status_code == 200
    assert client.get("/api/rl/packs/").status_code == 200
