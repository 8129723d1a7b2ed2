"""The server never calls an address a workspace user typed unless it is public or an operator
allowed its host: loopback, private and link-local (metadata) addresses are refused, after DNS
resolution, with the setting that allows them; a platform-wide key goes only to allowed hosts."""

from __future__ import annotations

import pytest

from levers9.outbound import ALLOWED_HOSTS_ENV, outbound_problem
from levers9.providers import ModelTarget, VllmProvider

REFUSED = [
    "http://127.0.0.1:18999/v1",
    "http://localhost:8000/v1",
    "http://169.254.169.254/latest/meta-data",
    "http://10.0.0.5:8000/v1",
    "http://[::1]:8000/v1",
    "http://0.0.0.0:8000/v1",
]


@pytest.mark.parametrize("url", REFUSED)
def test_it_refuses_internal_addresses_by_default_and_names_the_setting(url):
    problem = outbound_problem(url, environ={})
    assert problem
    assert ALLOWED_HOSTS_ENV in problem


def test_an_operator_allows_a_host_by_name():
    assert (
        outbound_problem("http://127.0.0.1:8000/v1", environ={ALLOWED_HOSTS_ENV: "127.0.0.1"}) == ""
    )


def test_a_public_address_passes():
    assert outbound_problem("http://93.184.216.34/v1", environ={}) == ""


def test_a_provider_pointed_inside_does_not_call_and_says_why():
    target = ModelTarget("vllm", model="m", base_url="http://127.0.0.1:18999/v1")
    usable, reason = VllmProvider(target, environ={}).available()
    assert not usable
    assert ALLOWED_HOSTS_ENV in reason


def test_the_platforms_own_serving_is_not_checked():
    target = ModelTarget("vllm", model="v2", base_url="http://127.0.0.1:18999/v1", trusted=True)
    usable, _reason = VllmProvider(target, environ={}).available()
    assert usable


def test_the_platform_wide_key_goes_only_to_allowed_hosts():
    public = ModelTarget(
        "vllm", model="m", base_url="http://93.184.216.34/v1", api_key_env="VLLM_API_KEY"
    )
    assert VllmProvider(public, environ={"VLLM_API_KEY": "k"})._key_env() == ""
    allowed = {"VLLM_API_KEY": "k", ALLOWED_HOSTS_ENV: "93.184.216.34"}
    assert VllmProvider(public, environ=allowed)._key_env() == "VLLM_API_KEY"


def test_saving_an_internal_judge_address_is_refused(in_workspace, monkeypatch):
    from arena.errors import ModelConnectionBadRequest
    from arena.judges import world_judge_set
    from arena.models import JudgeConnection, World

    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    with pytest.raises(ModelConnectionBadRequest, match=ALLOWED_HOSTS_ENV):
        world_judge_set(
            world=World.objects.get(slug="lettings"),
            provider="vllm",
            model="m",
            endpoint_url="http://127.0.0.1:18999/v1",
        )
    assert not JudgeConnection.objects.exists()
