"""Wrong API tokens are counted per address, as failed sign-ins are (issue 41, point 4): past the
allowance, every token from that address gets a JSON 429 with Retry-After, the right one
included, until the oldest failure ages out. Before, 30 wrong tokens in a row all got 401."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from levers9.throttles import token_failures_allowed
from tests.conftest import api_token

pytestmark = pytest.mark.django_db


def _with_token(workspace, token: str, address: str):
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost", HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/rl/jobs/", REMOTE_ADDR=address)


def test_it_answers_429_after_too_many_wrong_tokens_from_one_address(workspace):
    answers = [_with_token(workspace, f"wrong-{n}", "10.0.4.1") for n in range(30)]
    allowed = token_failures_allowed()
    assert allowed < 30
    statuses = [answer.status_code for answer in answers]
    assert statuses == [401] * allowed + [429] * (30 - allowed)
    refused = answers[-1]
    assert refused["Content-Type"].startswith("application/json")
    assert 0 < int(refused["Retry-After"]) <= settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    detail = refused.json()["detail"]
    assert "Too many wrong API tokens from this address" in detail
    assert "LEVERS9_TOKEN_FAILURES_PER_ADDRESS" in detail


def test_the_right_token_is_refused_from_that_address_and_served_from_another(workspace):
    right = api_token(workspace, "owner@acme.test")
    for n in range(token_failures_allowed()):
        _with_token(workspace, f"wrong-{n}", "10.0.4.2")
    # A guesser learns nothing from the answer: the right token is refused as well.
    assert _with_token(workspace, right, "10.0.4.2").status_code == 429
    assert _with_token(workspace, right, "10.0.4.3").status_code == 200


def test_it_never_counts_right_tokens_nor_requests_without_one(workspace, owner_client):
    right = api_token(workspace, "owner@acme.test")
    for _ in range(token_failures_allowed() + 5):
        assert _with_token(workspace, right, "10.0.4.4").status_code == 200
    # A signed-in browser from an address that sent wrong tokens is not a token guess.
    for n in range(token_failures_allowed()):
        _with_token(workspace, f"wrong-{n}", "127.0.0.1")
    assert owner_client.get("/api/rl/jobs/", REMOTE_ADDR="127.0.0.1").status_code == 200


def test_a_token_of_another_workspace_counts_as_a_wrong_one(workspace, other_workspace):
    rival = api_token(other_workspace, "owner@rival.test")
    answers = [
        _with_token(workspace, rival, "10.0.4.5") for _ in range(token_failures_allowed() + 1)
    ]
    assert answers[0].status_code == 401
    assert answers[-1].status_code == 429


def test_the_schema_says_any_operation_may_answer_429(owner_client):
    schema = owner_client.get("/api/schema/?format=json").json()
    read = schema["paths"]["/api/rl/jobs/"]["get"]["responses"]["429"]
    assert "wrong API tokens" in read["description"]
    assert "Retry-After" in read["headers"]
