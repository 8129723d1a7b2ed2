"""API write throttles: per user and per workspace, a JSON 429 with Retry-After, reads free,
and one workspace's writes never spend another's allowance. Failed sign-ins: per account and per
address, a 429 with Retry-After and the reason on the page, right passwords never counted."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache

from levers9.throttles import UserWriteThrottle, WorkspaceWriteThrottle
from tests.conftest import PASSWORD, client_for, make_user

BAD_TRAIN = {"pack": "no such pack!"}  # refused with a 400: a write that saves nothing


@pytest.fixture(autouse=True)
def _fresh_counts(db):
    # The counts live in the database's cache table (rolled back with the test) or in Redis.
    cache.clear()
    yield
    cache.clear()


def _write(client):
    return client.post("/api/rl/train/move-strategy/", BAD_TRAIN, content_type="application/json")


@pytest.fixture
def two_writes_per_user(monkeypatch):
    monkeypatch.setattr(UserWriteThrottle, "rate", "2/minute", raising=False)


def test_it_throttles_a_users_writes_with_retry_after(two_writes_per_user, owner_client):
    assert [_write(owner_client).status_code for _ in range(2)] == [400, 400]
    refused = _write(owner_client)
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/json")
    assert 0 < int(refused["Retry-After"]) <= 60
    detail = refused.json()["detail"]
    assert "2 writes per 60 s for one user" in detail
    assert "LEVERS9_THROTTLE_WRITES_PER_USER" in detail


def test_it_never_throttles_reads(two_writes_per_user, owner_client):
    for _ in range(3):
        _write(owner_client)
    assert [owner_client.get("/api/rl/jobs/").status_code for _ in range(5)] == [200] * 5


def test_it_counts_each_user_and_each_workspace_apart(
    two_writes_per_user, owner_client, workspace, other_workspace
):
    for _ in range(2):
        _write(owner_client)
    assert _write(owner_client).status_code == 429
    make_user(workspace, "manager@acme.test", "manager")
    teammate = client_for(workspace, "manager@acme.test")
    assert _write(teammate).status_code == 400
    # The rival's owner may have the same user id in its own schema: its own allowance.
    rival = client_for(other_workspace, "owner@rival.test")
    assert _write(rival).status_code == 400


def test_it_throttles_a_whole_workspace(monkeypatch, owner_client, workspace, other_workspace):
    monkeypatch.setattr(WorkspaceWriteThrottle, "rate", "3/minute", raising=False)
    make_user(workspace, "manager@acme.test", "manager")
    teammate = client_for(workspace, "manager@acme.test")
    assert [_write(c).status_code for c in (owner_client, teammate, owner_client)] == [400] * 3
    refused = _write(teammate)
    assert refused.status_code == 429
    assert "for one workspace" in refused.json()["detail"]
    assert "Retry-After" in refused
    assert _write(client_for(other_workspace, "owner@rival.test")).status_code == 400


def test_its_default_rates_come_from_the_settings(settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    assert UserWriteThrottle().rate == rates["writes_per_user"]
    assert WorkspaceWriteThrottle().rate == rates["writes_per_workspace"]


def test_the_schema_documents_the_429_of_writes(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    train = schema["paths"]["/api/rl/train/move-strategy/"]["post"]["responses"]
    assert "Retry-After" in train["429"]["headers"]
    assert "Too many writes" in train["429"]["description"]
    # A read meets only the wrong-token allowance (test_wrong_tokens_are_throttled).
    read = schema["paths"]["/api/rl/jobs/"]["get"]["responses"]["429"]
    assert "Too many writes" not in read["description"]


def test_with_redis_every_web_process_counts_the_same_writes():
    """REDIS_URL puts the throttles' counts in Redis, so processes share one limit; without
    it they live in the database's cache table (never one process's memory)."""
    from config.settings import cache_settings

    shared = cache_settings("redis://127.0.0.1:6379/0")["default"]
    assert shared["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert shared["LOCATION"] == "redis://127.0.0.1:6379/0"
    assert cache_settings("")["default"]["BACKEND"].endswith("DatabaseCache")


# --- sign-in: failed passwords per account and per address --------------------------------


def _sign_in(client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_it_refuses_the_right_password_after_forty_wrong_ones(workspace):
    client = client_for(workspace)
    answers = [_sign_in(client, "owner@acme.test", f"guess-{n}") for n in range(40)]
    right = _sign_in(client, "owner@acme.test", PASSWORD)
    assert right.status_code == 429, "the right password was accepted after 40 wrong ones"
    assert 0 < int(right["Retry-After"]) <= settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    assert "Too many failed sign-ins" in right.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still signed out
    statuses = [answer.status_code for answer in answers]
    allowed = settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT
    assert statuses == [200] * allowed + [429] * (40 - allowed)


def test_it_refuses_the_account_from_another_address_and_on_the_admins_sign_in(workspace):
    client = client_for(workspace)
    for n in range(settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT):
        _sign_in(client, "owner@acme.test", f"guess-{n}", address="10.0.0.1")
    elsewhere = _sign_in(client_for(workspace), "owner@acme.test", PASSWORD, address="10.0.0.2")
    assert elsewhere.status_code == 429
    # The admin's own sign-in authenticates through the same backends: refused, not signed in.
    admin = client_for(workspace)
    admin.post(
        "/admin/login/",
        {"username": "owner@acme.test", "password": PASSWORD, "next": "/admin/"},
        REMOTE_ADDR="10.0.0.3",
    )
    assert "_auth_user_id" not in admin.session


def test_it_refuses_one_address_trying_many_accounts(settings, workspace):
    settings.LEVERS9_LOGIN_FAILURES_PER_ADDRESS = 5
    client = client_for(workspace)
    for n in range(5):
        assert _sign_in(client, f"someone-{n}@acme.test", "guess").status_code == 200
    assert _sign_in(client, "owner@acme.test", PASSWORD).status_code == 429
    # Another address signs the same owner in.
    assert (
        _sign_in(client_for(workspace), "owner@acme.test", PASSWORD, "10.0.0.9").status_code == 302
    )


def test_it_never_counts_right_passwords(workspace):
    for _ in range(settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT + 5):
        assert _sign_in(client_for(workspace), "owner@acme.test", PASSWORD).status_code == 302


def test_one_workspaces_failures_never_lock_out_another(workspace, other_workspace):
    make_user(other_workspace, "owner@acme.test", "owner")  # the same e-mail over there
    for n in range(settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT):
        _sign_in(client_for(workspace), "owner@acme.test", f"guess-{n}", "10.0.0.1")
    assert (
        _sign_in(client_for(workspace), "owner@acme.test", PASSWORD, "10.0.0.2").status_code == 429
    )
    rival = _sign_in(client_for(other_workspace), "owner@acme.test", PASSWORD, "10.0.0.2")
    assert rival.status_code == 302


def test_the_refusal_ends_when_the_failures_age_out(settings, workspace, monkeypatch):
    import levers9.throttles as throttles

    # From the real time: the cache's own expiry reads the same clock.
    now = [throttles.time.time()]
    monkeypatch.setattr(throttles.time, "time", lambda: now[0])
    for n in range(settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT):
        _sign_in(client_for(workspace), "owner@acme.test", f"guess-{n}")
    refused = _sign_in(client_for(workspace), "owner@acme.test", PASSWORD)
    assert int(refused["Retry-After"]) == settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    now[0] += settings.LEVERS9_LOGIN_FAILURE_WINDOW_S + 1
    assert _sign_in(client_for(workspace), "owner@acme.test", PASSWORD).status_code == 302
