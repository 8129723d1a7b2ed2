"""Providers against a real HTTP server on loopback, with the real openai / anthropic clients:
replies, timeouts, 429 then success, 5xx, refusals, concurrency limits, key handling."""

from __future__ import annotations

import threading

import pytest

from levers9.providers import (
    CallLimits,
    ModelTarget,
    ProviderBusy,
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    SimulatorProvider,
    provider_choices,
    provider_for,
)
from tests.policies.stub_server import Answer
from tests.threads import raised_in_threads

MESSAGES = [
    {"role": "system", "content": "You are the agent."},
    {"role": "assistant", "content": "Good morning, Acme Lettings."},
    {"role": "user", "content": "Hi, is the flat on Elm Street still free?"},
]


def _vllm(stub, **fields) -> ModelTarget:
    return ModelTarget("vllm", model="Qwen/Qwen3-14B", base_url=stub.base_url, **fields)


def test_it_gets_a_reply_from_a_vllm_endpoint(stub):
    provider = provider_for(_vllm(stub, lora_adapter="v7-wording"))
    assert provider.available() == (True, "")
    assert provider.reply(MESSAGES, max_tokens=50) == stub.default.text
    [seen] = stub.requests
    assert seen.path == "/v1/chat/completions"
    # vLLM serves the adapter under its own name: asking for it applies it.
    assert seen.body["model"] == "v7-wording"
    assert seen.body["max_tokens"] == 50
    assert seen.body["messages"][-1]["content"] == MESSAGES[-1]["content"]


def test_it_sends_the_named_key_variable_to_a_vllm_endpoint(stub, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "vllm-key-123456")
    provider_for(_vllm(stub, api_key_env="VLLM_API_KEY")).reply(MESSAGES)
    assert stub.requests[0].headers["authorization"] == "Bearer vllm-key-123456"


def test_it_never_sends_the_openai_key_to_a_vllm_endpoint(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-stay-with-openai")
    provider_for(_vllm(stub)).reply(MESSAGES)
    assert stub.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_it_refuses_a_key_variable_not_meant_for_endpoints(stub, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://user:secret@db/levers9")
    provider = provider_for(_vllm(stub, api_key_env="DATABASE_URL"))
    usable, reason = provider.available()
    assert not usable
    assert "VLLM_API_KEY" in reason
    with pytest.raises(ProviderUnavailable):
        provider.reply(MESSAGES)
    assert stub.requests == []


def test_it_names_a_missing_key_variable_of_a_vllm_endpoint(stub):
    usable, reason = provider_for(_vllm(stub, api_key_env="VLLM_API_KEY")).available()
    assert (usable, reason) == (False, "set VLLM_API_KEY on the dashboard pod")


def test_it_gets_a_reply_from_openai_by_model_name(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0001")
    provider = provider_for(ModelTarget("openai", model="gpt-4o-mini", base_url=stub.base_url))
    assert provider.reply(MESSAGES, max_tokens=40) == stub.default.text
    [seen] = stub.requests
    assert seen.body["model"] == "gpt-4o-mini"
    assert seen.body["max_completion_tokens"] == 40
    assert seen.headers["authorization"] == "Bearer sk-test-openai-0001"


def test_it_gets_a_reply_from_anthropic_by_model_name(stub, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0001")
    stub.default = Answer(text="Of course, a viewing on Saturday?")
    target = ModelTarget("anthropic", model="claude-test-model", base_url=stub.root_url)
    assert provider_for(target).reply(MESSAGES) == "Of course, a viewing on Saturday?"
    [seen] = stub.requests
    assert seen.path == "/v1/messages"
    # The key travels in the client's own auth header (x-api-key or a bearer token).
    sent = seen.headers.get("x-api-key") or seen.headers["authorization"].removeprefix("Bearer ")
    assert sent == "sk-ant-test-0001"
    assert seen.body["system"] == "You are the agent."
    # Anthropic wants alternating turns that start with the user's.
    roles = [message["role"] for message in seen.body["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_it_retries_a_429_then_succeeds(stub, fast_retries):
    stub.then(Answer(status=429, headers={"Retry-After": "0"}), Answer(text="Second time lucky."))
    assert provider_for(_vllm(stub)).reply(MESSAGES) == "Second time lucky."
    assert len(stub.requests) == 2


def test_it_retries_5xx_and_then_says_which_endpoint_failed(stub, fast_retries):
    stub.default = Answer(status=503, error_message="engine overloaded")
    with pytest.raises(ProviderError) as raised:
        provider_for(_vllm(stub)).reply(MESSAGES)
    assert len(stub.requests) == 3
    message = str(raised.value)
    assert stub.base_url in message
    assert "503" in message
    assert "engine overloaded" in message


def test_it_recovers_from_a_500_on_anthropic(stub, fast_retries, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0002")
    stub.then(Answer(status=500), Answer(text="Back again."))
    target = ModelTarget("anthropic", model="claude-haiku", base_url=stub.root_url)
    assert provider_for(target).reply(MESSAGES) == "Back again."
    assert len(stub.requests) == 2


def test_it_gives_a_clear_error_when_the_endpoint_does_not_answer_in_time(stub, monkeypatch):
    monkeypatch.setenv("LEVERS9_PROVIDER_TIMEOUT", "0.3")
    stub.default = Answer(delay=1.5)
    with pytest.raises(ProviderTimeout) as raised:
        provider_for(_vllm(stub)).reply(MESSAGES)
    assert "did not answer within 0.3 s" in str(raised.value)
    assert stub.base_url in str(raised.value)


def test_it_says_nothing_answers_at_a_closed_port(fast_retries):
    provider = provider_for(ModelTarget("vllm", model="m", base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ProviderError) as raised:
        provider.reply(MESSAGES)
    assert "nothing answers there" in str(raised.value)


def test_it_does_not_retry_a_refused_request(stub, fast_retries):
    stub.default = Answer(status=400, error_message="model 'x' does not exist")
    with pytest.raises(ProviderRejected) as raised:
        provider_for(_vllm(stub)).reply(MESSAGES)
    assert len(stub.requests) == 1
    assert "does not exist" in str(raised.value)


def test_it_limits_requests_in_flight_per_endpoint(stub):
    stub.default = Answer(delay=0.2)
    limits = CallLimits(timeout=10, concurrency=2)
    errors = raised_in_threads(lambda: provider_for(_vllm(stub), limits=limits).reply(MESSAGES), 6)
    assert errors == []
    assert len(stub.requests) == 6
    assert stub.most_in_flight == 2


def test_it_gives_up_waiting_for_a_free_slot(stub):
    stub.default = Answer(delay=1.0)
    limits = CallLimits(timeout=5, concurrency=1)
    first = threading.Thread(
        target=lambda: provider_for(_vllm(stub), limits=limits).reply(MESSAGES)
    )
    first.start()
    while not stub.requests:
        pass
    impatient = CallLimits(timeout=0.1, concurrency=1)
    with pytest.raises(ProviderBusy):
        provider_for(_vllm(stub), limits=impatient).reply(MESSAGES)
    first.join()


def test_it_offers_openai_and_anthropic_only_with_their_keys(monkeypatch):
    choices = {choice.provider: choice for choice in provider_choices()}
    assert choices["simulator"].available
    assert choices["vllm"].available
    assert (choices["openai"].available, choices["openai"].reason) == (False, "set OPENAI_API_KEY")
    assert choices["anthropic"].reason == "set ANTHROPIC_API_KEY"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-now-present")
    choices = {choice.provider: choice for choice in provider_choices()}
    assert choices["openai"].available
    assert choices["openai"].reason == ""
    assert not choices["anthropic"].available
    usable, reason = provider_for(ModelTarget("anthropic", model="claude")).available()
    assert (usable, reason) == (False, "set ANTHROPIC_API_KEY on the dashboard pod")


def test_it_answers_from_the_simulator_with_the_version_move_strategy():
    provider = SimulatorProvider({"kind": "scripted"})
    assert provider.available() == (True, "")
    objection = [
        {"role": "assistant", "content": "Good morning."},
        {"role": "user", "content": "It's a bit expensive for us, I'm worried about the price."},
    ]
    text = provider.reply(objection)
    assert text
    # Same dialogue, same words: the simulator is scripted.
    assert provider.reply(objection) == text
