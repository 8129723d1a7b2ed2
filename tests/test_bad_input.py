"""Bad input to the API gets a 4xx JSON error naming the field, never a 500 or an HTML page;
an unexpected failure gets a JSON 500 with an id to find its traceback in the log."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import RequestFactory
from django_tenants.utils import schema_context
from rest_framework.request import Request

from arena.models import World
from arena.services.calls import calls_import
from evaluation.models import Evaluation
from levers9.api import exception_handler
from levers9.jobs.models import Job
from tests.recorded_calls import two_turn_call

A_CALL = two_turn_call("bad-input-call")


def _jobs(workspace) -> int:
    with schema_context(workspace.schema_name):
        return Job.objects.count()


@pytest.fixture
def a_call(workspace):
    """Pagination only reaches the database when there is a row to page through."""
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        calls_import(world=world, text=json.dumps(A_CALL), source="test", convert=True)


def test_it_refuses_a_limit_past_the_maximum(owner_client, a_call):
    response = owner_client.get("/api/rl/calls/?limit=9223372036854775808")
    assert response.status_code == 400, response.content
    assert "limit" in response.json()
    huge_offset = owner_client.get("/api/rl/calls/?offset=9223372036854775808")
    assert huge_offset.status_code == 400, huge_offset.content
    assert "offset" in huge_offset.json()
    assert owner_client.get("/api/rl/calls/?limit=10").status_code == 200


@pytest.mark.parametrize("name", ["pack", "outcome"])
def test_it_refuses_a_nul_in_a_query_parameter(owner_client, a_call, name):
    response = owner_client.get(f"/api/rl/calls/?{name}=%00")
    assert response.status_code == 400, response.content
    assert name in response.json()


def test_it_refuses_a_nul_in_a_json_string(owner_client, workspace):
    before = _jobs(workspace)
    response = owner_client.post(
        "/api/rl/engines/runs/",
        {"algorithm": "ppo", "pack": "lettings", "knobs": {"note": "a\x00b"}},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "knobs.note" in response.json()
    assert _jobs(workspace) == before


def test_it_refuses_an_evaluation_seed_past_the_stored_range(owner_client, workspace):
    from policies.models import PolicyVersion
    from policies.services import version_register

    with schema_context(workspace.schema_name):
        baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
        candidate = version_register(
            world=World.objects.get(slug="lettings"),
            name="other",
            parent=baseline,
            move_strategy=baseline.move_strategy,
            learned_from={},
        )
    response = owner_client.post(
        "/api/rl/evaluations/",
        {"pack": "lettings", "candidate": candidate.number, "baseline": 1, "seed": 2**31},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "seed" in response.json()
    with schema_context(workspace.schema_name):
        assert not Evaluation.objects.exists()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/rl/train/move-strategy/", {"pack": "lettings"}),
        ("/api/rl/train/wording/", {"method": "dpo", "preference_version": 1}),
    ],
)
def test_it_refuses_a_train_seed_past_32_bits(owner_client, workspace, path, body):
    before = _jobs(workspace)
    response = owner_client.post(path, {**body, "seed": 2**32}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "seed" in response.json()
    assert _jobs(workspace) == before


def test_it_refuses_wording_epochs_past_the_maximum(owner_client, workspace):
    before = _jobs(workspace)
    response = owner_client.post(
        "/api/rl/train/wording/",
        {"method": "dpo", "preference_version": 1, "epochs": 1e308},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "epochs" in response.json()
    assert _jobs(workspace) == before


def test_it_refuses_wording_epochs_past_the_maximum_from_the_page(in_workspace):
    from training.wording import WordingCardError, wording_choice_from

    with pytest.raises(WordingCardError, match="[Ee]pochs"):
        wording_choice_from(
            method="dpo", preference=object(), pool_name="", parent=None, epochs="1e308"
        )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/rl/train/move-strategy/", {"pack": "lettings"}),
        ("/api/rl/engines/runs/", {"algorithm": "q-learning-online", "pack": "lettings"}),
        ("/api/rl/train/wording/", {"method": "dpo", "preference_version": 1}),
    ],
)
def test_it_refuses_parent_zero(owner_client, workspace, path, body):
    before = _jobs(workspace)
    response = owner_client.post(path, {**body, "parent": 0}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "start at 1" in response.json()["parent"][0]
    assert _jobs(workspace) == before


def test_it_answers_an_unexpected_failure_with_json_and_logs_it(caplog):
    request = Request(RequestFactory().get("/api/rl/calls/"))
    with caplog.at_level(logging.ERROR, logger="levers9.api"):
        response = exception_handler(RuntimeError("the secret detail"), {"request": request})
    assert response.status_code == 500
    error_id = response.data["error_id"]
    assert error_id in response.data["detail"]
    assert "the secret detail" not in str(response.data)
    logged = [record for record in caplog.records if error_id in record.getMessage()]
    assert logged
    assert logged[0].exc_info[0] is RuntimeError


def test_it_leaves_failures_outside_the_api_to_django():
    request = Request(RequestFactory().get("/train/"))
    assert exception_handler(RuntimeError("page"), {"request": request}) is None


def test_json_nested_past_any_limit_is_a_400_not_a_500(owner_client):
    deep = "[" * 100_000 + "]" * 100_000
    response = owner_client.post("/api/rl/evaluations/", deep, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in json.dumps(response.json())
