"""Roles — reviewer, manager, owner — are enforced on pages, API and admin alike."""

from __future__ import annotations

from tests.conftest import client_for

JSONL = '{"id": "r1", "outcome": "lost", "turns": [{"speaker": "agent", "text": "Hi"}]}\n'


def test_it_lets_a_reviewer_duel_but_not_train(reviewer_client):
    assert reviewer_client.get("/duel/").status_code == 200
    assert reviewer_client.get("/train/").status_code == 403
    assert reviewer_client.get("/release/").status_code == 403


def test_it_lets_a_manager_train_but_not_release(manager_client):
    assert manager_client.get("/train/").status_code == 200
    assert manager_client.get("/release/").status_code == 403


def test_it_refuses_a_reviewer_the_import_api(reviewer_client):
    response = reviewer_client.post(
        "/api/rl/packs/lettings/calls/import/", JSONL, content_type="application/jsonl"
    )
    assert response.status_code == 403
    assert "manager role" in response.json()["detail"]


def test_it_lets_a_manager_import(manager_client):
    response = manager_client.post(
        "/api/rl/packs/lettings/calls/import/?convert=real-calls",
        JSONL,
        content_type="application/jsonl",
    )
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 1


def test_it_lets_a_reviewer_view_but_not_change_in_the_admin(reviewer_client):
    assert reviewer_client.get("/admin/arena/call/").status_code == 200
    assert reviewer_client.get("/admin/arena/world/add/").status_code == 403
    # Users are the owner's business.
    assert reviewer_client.get("/admin/auth/user/").status_code == 403


def test_it_lets_the_owner_manage_users_in_the_admin(owner_client):
    assert owner_client.get("/admin/auth/user/").status_code == 200


def test_it_sends_an_anonymous_visitor_to_the_login_page(workspace):
    response = client_for(workspace).get("/duel/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert client_for(workspace).get("/api/rl/calls/").status_code in {401, 403}
