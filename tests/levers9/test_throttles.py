"""API write throttles: per user and per workspace, a JSON 429 with Retry-After, reads free,
and one workspace's writes never spend another's allowance."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from levers9.throttles import UserWriteThrottle, WorkspaceWriteThrottle
from tests.conftest import client_for, make_user

BAD_TRAIN = {"pack": "no such pack!"}  # refused with a 400: a write that saves nothing


@pytest.fixture(autouse=True)
def _fresh_counts():
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


def test_the_schema_documents_the_429_on_writes_only(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    train = schema["paths"]["/api/rl/train/move-strategy/"]["post"]["responses"]
    assert "Retry-After" in train["429"]["headers"]
    assert "429" not in schema["paths"]["/api/rl/jobs/"]["get"]["responses"]


def test_with_redis_every_web_process_counts_the_same_writes():
    """REDIS_URL puts the throttles' counts in Redis, so processes share one limit; the
    embedded demo (one web process) counts in memory."""
    from levers9.settings import cache_settings

    shared = cache_settings("redis://127.0.0.1:6379/0")["default"]
    assert shared["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert shared["LOCATION"] == "redis://127.0.0.1:6379/0"
    assert cache_settings("")["default"]["BACKEND"].endswith("LocMemCache")
