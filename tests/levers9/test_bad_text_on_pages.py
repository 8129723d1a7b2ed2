"""Text PostgreSQL cannot hold (a NUL, a lone surrogate) sent to a page, a form or the admin is
a 400 page naming the field, as the API's rule says, never a 500; the admin's bulk actions
refuse ids that are not ids, with a message."""

from __future__ import annotations

import pytest
from django.test import Client
from django_tenants.utils import schema_context

from arena.models import Call, World
from tests.conftest import PASSWORD, make_user


def _answering(workspace, email: str) -> Client:
    """Signed in, and answering as a server does: an exception is a 500, not re-raised."""
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost", raise_request_exception=False)
    assert client.post("/login/", {"username": email, "password": PASSWORD}).status_code == 302
    return client


@pytest.fixture
def reviewer(workspace) -> Client:
    make_user(workspace, "rita@acme.test", "reviewer")
    return _answering(workspace, "rita@acme.test")


@pytest.fixture
def manager(workspace) -> Client:
    make_user(workspace, "max@acme.test", "manager")
    return _answering(workspace, "max@acme.test")


@pytest.fixture
def owner(workspace) -> Client:
    return _answering(workspace, "owner@acme.test")


def _refused_naming(response, field: str) -> None:
    assert response.status_code == 400, response.content[:500]
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert field in page
    assert "Traceback" not in page


def test_it_refuses_a_nul_in_a_query_parameter_of_a_page(reviewer):
    _refused_naming(reviewer.get("/duel/?scenario=a%00b"), "scenario")


def test_a_surrogates_bytes_in_a_query_read_as_a_replacement_character(reviewer):
    # UTF-8 has no encoding for a lone surrogate: its would-be bytes are not UTF-8, and Django
    # reads them as U+FFFD, which the database holds. (In JSON, "\\ud800" is one: refused.)
    assert reviewer.get("/duel/?scenario=a%ED%A0%80b").status_code == 200


def test_it_refuses_a_nul_in_a_form_field(manager, workspace):
    response = manager.post("/world/new/", {"slug": "nul-page", "name": "a\x00b"})
    _refused_naming(response, "name")
    with schema_context(workspace.schema_name):
        assert not World.objects.filter(slug="nul-page").exists()


def test_it_refuses_a_nul_in_the_system_prompt(manager):
    response = manager.post("/policies/worlds/lettings/system-prompt/", {"system_prompt": "a\x00b"})
    _refused_naming(response, "system_prompt")


def test_it_refuses_a_nul_in_a_field_name(manager):
    _refused_naming(manager.post("/world/new/", {"sl\x00ug": "x"}), "sl\\0ug")


def test_it_refuses_a_nul_in_a_sign_in(workspace):
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost", raise_request_exception=False)
    _refused_naming(client.post("/login/", {"username": "a\x00b", "password": "x"}), "username")


def test_it_refuses_a_nul_in_an_admin_form(owner):
    _refused_naming(owner.get("/admin/arena/call/?q=a%00b"), "q")


def test_the_same_form_without_the_nul_still_works(manager, workspace):
    response = manager.post("/world/new/", {"slug": "fine-page", "name": "Fine"})
    assert response.status_code == 302, response.content[:500]
    with schema_context(workspace.schema_name):
        assert World.objects.filter(slug="fine-page").exists()


# --- the admin's bulk actions ---------------------------------------------------------------


@pytest.mark.parametrize("selected", ["abc", "99999999999999999999", "1.5"])
def test_a_bulk_action_refuses_ids_that_are_not_ids(owner, selected):
    response = owner.post(
        "/admin/arena/call/",
        {"action": "delete_selected", "_selected_action": ["1", selected]},
    )
    assert response.status_code == 302, response.content[:500]
    page = owner.get(response["Location"]).content.decode()
    assert f"&quot;{selected}&quot; is not an id" in page
    assert "No items have been changed" in page


def test_a_bulk_action_refuses_a_nul_in_an_id(owner):
    response = owner.post(
        "/admin/arena/call/",
        {"action": "delete_selected", "_selected_action": ["a\x00b"]},
    )
    _refused_naming(response, "_selected_action")


def test_a_bulk_action_still_takes_real_ids(owner, workspace):
    import json

    from arena.services.calls import calls_import
    from tests.recorded_calls import two_turn_call

    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        calls_import(
            world=world, text=json.dumps(two_turn_call("bulk-call")), source="test", convert=True
        )
        call = Call.objects.get(external_id="bulk-call")
    response = owner.post(
        "/admin/arena/call/",
        {"action": "delete_selected", "_selected_action": [str(call.pk)]},
    )
    assert response.status_code == 200, response.content[:500]
    assert "Are you sure" in response.content.decode()


# --- cookies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/duel/", "/api/rl/me/"])
def test_a_nul_in_the_session_cookie_is_refused_and_the_cookie_cleared(workspace, path):
    # A quoted cookie value takes octal escapes: \000 is a NUL, looked up as a session key.
    client = Client(
        HTTP_HOST=f"{workspace.slug}.localhost",
        HTTP_COOKIE='sessionid="abcdefgh\\000ijk"',
        raise_request_exception=False,
    )
    response = client.get(path)
    assert response.status_code == 400, response.content[:300]
    assert "cookie sessionid" in response.content.decode()
    assert response.cookies["sessionid"].value == ""  # cleared: the next request works
    assert response.cookies["sessionid"]["max-age"] == 0
