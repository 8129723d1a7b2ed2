"""Pages: login per workspace, the missions home, the world badge, the calls pages."""

from __future__ import annotations

import json

from django_tenants.utils import schema_context

from arena.models import World
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from tests.conftest import PASSWORD, client_for
from tests.pages import page_text


def test_it_signs_in_on_the_workspace_and_shows_the_missions(workspace):
    client = client_for(workspace)
    page = client.get("/login/")
    assert page.status_code == 200
    assert b"Sign in to Acme" in page.content
    wrong = client.post("/login/", {"username": "owner@acme.test", "password": "nope"})
    assert wrong.status_code == 200
    assert b"correct" in wrong.content  # Django's "Please enter a correct ..." message
    client.post("/login/", {"username": "owner@acme.test", "password": PASSWORD})
    home = page_text(client, "/")
    for mission in ("Duel", "Level up", "Boss fight", "Crown the champion"):
        assert mission in home
    for step in ("Environment", "Engines", "Endpoints", "Release"):
        assert step in home
    assert "v1 · baseline" in home


def test_it_names_customer_agent_and_judge_in_the_badge(owner_client, workspace):
    with schema_context(workspace.schema_name):
        world = world_create(slug="real", name="Real calls")
        call = {"id": "c1", "outcome": "won", "turns": [{"speaker": "agent", "text": "Hi"}]}
        calls_import(world=world, text=json.dumps(call))
        assert World.objects.count() == 2
    simulated = page_text(owner_client, "/?world=lettings")
    assert "simulated customers" in simulated
    assert "v1 · baseline on Simulator" in simulated
    assert "rubric judge" in simulated
    real = page_text(owner_client, "/?world=real")
    assert "1 real recorded call of Real calls" in real
    # The choice is remembered for the next page.
    assert "1 real recorded call of Real calls" in owner_client.get("/duel/").content.decode()


def test_it_lists_and_shows_real_calls(owner_client, workspace):
    with schema_context(workspace.schema_name):
        world = world_create(slug="real", name="Real calls")
        turns = [
            {"speaker": "agent", "text": "Would you consider a donation?"},
            {"speaker": "customer", "text": "Maybe a small one."},
        ]
        calls_import(
            world=world, text=json.dumps({"id": "lost-call-9", "outcome": "lost", "turns": turns})
        )
    listing = page_text(owner_client, "/calls/?outcome=lost")
    # A hyphen cannot occur in the page's CSRF token, which once held "c9" by chance.
    assert "lost-call-9" in listing
    assert "lost-call-9" not in owner_client.get("/calls/?outcome=won").content.decode()
    with schema_context(workspace.schema_name):
        from arena.models import Call

        call_id = Call.objects.get(external_id="lost-call-9").pk
    detail = page_text(owner_client, f"/calls/{call_id}/")
    assert "Maybe a small one." in detail
    assert owner_client.get("/calls/999999/").status_code == 404


def test_it_shows_the_public_index_without_listing_workspaces_to_visitors(db):
    from django.test import Client

    # Which workspaces exist is not an anonymous visitor's to read (the hardening issue).
    page = Client(HTTP_HOST="localhost").get("/")
    assert page.status_code == 200
    assert b"acme.localhost" not in page.content
    assert b"rival" not in page.content
    assert Client(HTTP_HOST="nobody.localhost").get("/").status_code == 404


def test_it_shows_where_the_workspace_stands_on_each_mission(owner_client):
    page = page_text(owner_client, "/")
    assert 'data-mission="3"' in page
    assert "nothing frozen yet" in page
    assert "only v1 · baseline so far" in page
    assert "no evaluation yet" in page
    assert "live in Lettings: v1 · baseline" in page  # each world names its own live version
    assert "Next:" in page
