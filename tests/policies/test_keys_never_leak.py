"""Keys stay on the pod: a key planted in the environment is used for the call, and never
appears in a page, an API response, the admin, the database, an error or a log line."""

from __future__ import annotations

import logging
import secrets

import pytest

from arena.models import JudgeConnection, Moment, World
from policies.agents import VersionDidNotAnswer, version_reply
from policies.models import Endpoint, PolicyVersion
from tests.policies.stub_server import Answer


@pytest.fixture
def planted(monkeypatch, stub):
    keys = {
        "OPENAI_API_KEY": f"sk-planted-openai-{secrets.token_hex(12)}",
        "ANTHROPIC_API_KEY": f"sk-ant-planted-{secrets.token_hex(12)}",
        "VLLM_API_KEY": f"planted-vllm-{secrets.token_hex(12)}",
    }
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.root_url)
    return keys


def _contains_any(text: str, keys: dict[str, str]) -> list[str]:
    return [name for name, value in keys.items() if value in text]


def test_it_never_shows_stores_or_logs_a_planted_key(
    in_workspace, planted, stub, owner_client, caplog, fast_retries
):
    caplog.set_level(logging.DEBUG)
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    responses = []

    def post(path, body):
        response = owner_client.post(path, body, content_type="application/json")
        responses.append(response)
        assert response.status_code == 200, response.content
        return response

    # The agent on OpenAI, then Anthropic, then a vLLM endpoint whose key is named.
    moment = Moment.objects.create(
        world=World.objects.get(slug="lettings"),
        kind=Moment.Kind.SYNTHETIC,
        context=[{"speaker": "customer", "text": "Hi, is the flat free?"}],
    )
    seen_keys = []
    for body in (
        {"provider": "openai", "model": "gpt-4o-mini"},
        {"provider": "anthropic", "model": "claude-test-model"},
        {
            "provider": "vllm",
            "model": "Qwen/Qwen3-14B",
            "endpoint_url": stub.base_url,
            "api_key_env": "VLLM_API_KEY",
        },
    ):
        post(f"/api/rl/policies/{baseline.pk}/runs-on", body)
        baseline.refresh_from_db()
        assert version_reply(baseline, moment).text == stub.default.text
        headers = stub.requests[-1].headers
        seen_keys.append(headers.get("x-api-key") or headers["authorization"].split()[-1])
    # Each key went where it belongs, and only there.
    assert seen_keys == [
        planted["OPENAI_API_KEY"],
        planted["ANTHROPIC_API_KEY"],
        planted["VLLM_API_KEY"],
    ]

    # An endpoint that echoes the key back in its error: the error we raise is scrubbed.
    stub.default = Answer(status=503, error_message=f"bad key {planted['VLLM_API_KEY']}")
    with pytest.raises(VersionDidNotAnswer) as raised:
        version_reply(baseline, moment)
    assert "[key]" in str(raised.value)
    assert not _contains_any(str(raised.value), planted)

    # A model judge with the same key.
    post_judge = owner_client.post(
        "/environment/lettings/judge/",
        {"provider": "openai", "model": "gpt-judge"},
    )
    assert post_judge.status_code == 302

    pages = [
        owner_client.get(path)
        for path in (
            "/policies/",
            "/environment/",
            "/endpoints/",
            "/",
            "/api/rl/policies/",
            f"/api/rl/policies/{baseline.pk}/",
            "/api/rl/endpoints/",
            "/api/rl/packs/",
            "/admin/policies/policyversion/",
            f"/admin/policies/policyversion/{baseline.pk}/change/",
            "/admin/policies/endpoint/",
            "/admin/arena/world/",
        )
    ]
    for response in [*responses, *pages]:
        assert response.status_code in (200, 302)
        assert not _contains_any(response.content.decode(), planted), response.request["PATH_INFO"]

    stored = " ".join(
        str(row)
        for model in (PolicyVersion, World, JudgeConnection, Endpoint)
        for row in model.objects.values()
    )
    assert not _contains_any(stored, planted)
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    assert "answered in" in logged  # the calls were logged, without their keys
    assert not _contains_any(logged, planted)
