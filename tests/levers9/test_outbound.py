"""The server never calls an address a workspace user typed unless it is globally routable or
an operator allowed its host: every other address is refused, after DNS resolution and again at
connect time, with the setting that allows them and without saying what a name resolved to; a
platform-wide key goes only to allowed hosts. No test here sends traffic anywhere: names are
made up and answered in-process, and connections are refused before a socket opens."""

from __future__ import annotations

import socket

import pytest

from levers9.outbound import ALLOWED_HOSTS_ENV, address_is_public, outbound_problem
from levers9.outbound_transport import PinnedTransport
from levers9.providers import ModelTarget, ProviderRejected, VllmProvider

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
    from arena.judge.world_judge_choice import world_judge_set
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


# --- only globally routable addresses (issue 27) ------------------------------------------

NON_GLOBAL_LITERALS = [
    "http://100.64.0.1/v1",  # shared address space (carrier-grade NAT)
    "http://100.100.100.200/latest/meta-data",  # a cloud's metadata service, inside it
    "http://192.0.0.9/v1",  # 192.0.0.0/24, which Python calls global in part
    "http://192.0.0.170/v1",
    "http://192.88.99.1/v1",  # the retired 6to4 relay anycast
    "http://[2002:7f00:1::]/v1",  # 6to4 of 127.0.0.1, "global" to Python 3.11
    "http://[2002:a9fe:a9fe::]/v1",  # 6to4 of 169.254.169.254
    "http://[::ffff:127.0.0.1]/v1",  # IPv4-mapped loopback
    "http://[::ffff:100.64.0.1]/v1",
    "http://[::127.0.0.1]/v1",  # IPv4-compatible loopback
    "http://[64:ff9b::7f00:1]/v1",  # NAT64 of 127.0.0.1
    "http://[64:ff9b:1::a00:1]/v1",  # local-use NAT64
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/v1",  # Teredo
    "http://[ff0e::1]/v1",  # global-scope multicast
]


@pytest.mark.parametrize("url", NON_GLOBAL_LITERALS)
def test_it_refuses_every_address_that_is_not_globally_routable(url):
    problem = outbound_problem(url, environ={})
    assert problem
    assert ALLOWED_HOSTS_ENV in problem


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "2606:4700::1111", "2002:808:808::", "::ffff:8.8.8.8", "1.1.1.1"]
)
def test_a_public_address_passes_in_every_spelling(address):
    assert address_is_public(address)


def test_an_operator_still_allows_a_non_global_host_by_name():
    environ = {ALLOWED_HOSTS_ENV: "100.64.0.1"}
    assert outbound_problem("http://100.64.0.1:8000/v1", environ=environ) == ""


@pytest.fixture
def made_up_dns(monkeypatch):
    """Answers for made-up names, so no test asks a real resolver or reaches a real host:
    `answers[name]` lists one answer per lookup (a list of addresses; the last answer repeats,
    and an empty one is a name that does not resolve)."""
    answers: dict[str, list[list[str]]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host
        if host not in answers:
            return real(host, port, *args, **kwargs)
        queue = answers[host]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


@pytest.fixture
def no_connections(monkeypatch):
    """Every TCP connection attempted, none made: a test here never sends traffic anywhere."""
    attempts: list[tuple] = []

    def create_connection(address, *args, **kwargs):
        attempts.append(address)
        raise ConnectionRefusedError("no connections in this test")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return attempts


def test_a_refusal_never_says_what_a_name_resolves_to(made_up_dns):
    made_up_dns["metadata.example"] = [["100.100.100.200"]]
    made_up_dns["nowhere.example"] = [[]]
    problem = outbound_problem("http://metadata.example/latest", environ={})
    assert problem
    assert "100.100.100.200" not in problem
    # Nor whether it resolved at all: an internal name reads as a name that does not exist.
    missing = outbound_problem("http://nowhere.example/latest", environ={})
    assert missing.replace("nowhere", "X") == problem.replace("metadata", "X")


def test_a_name_that_resolves_inside_at_connect_time_is_never_connected_to(
    made_up_dns, no_connections
):
    # DNS rebinding: public when checked, inside when the client connects.
    # Public for this test's check and the one before the call; inside at connect time.
    made_up_dns["rebind.example"] = [["93.184.216.34"], ["93.184.216.34"], ["100.64.0.1"]]
    target = ModelTarget("vllm", model="m", base_url="http://rebind.example:8000/v1")
    provider = VllmProvider(target, environ={})
    assert provider.available() == (True, "")
    with pytest.raises(ProviderRejected) as refused:
        provider.reply([{"role": "user", "content": "hello"}])
    assert no_connections == []
    assert ALLOWED_HOSTS_ENV in str(refused.value)
    assert "100.64.0.1" not in str(refused.value)


def test_the_transport_connects_to_the_address_it_checked_keeping_the_name(made_up_dns):
    import httpx2

    # First lookup: one of the name's addresses is inside; the second: public only.
    made_up_dns["public.example"] = [["93.184.216.34", "10.0.0.7"], ["93.184.216.34"]]
    seen: list[tuple[str, str, str]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        # As the connection sees it: where it goes, the Host it names, the name TLS checks.
        seen.append(
            (request.url.host, request.headers["host"], request.extensions.get("sni_hostname"))
        )
        return httpx2.Response(200, json={"ok": True})

    transport = PinnedTransport(environ={}, inner=httpx2.MockTransport(answer))
    with httpx2.Client(transport=transport) as client:
        with pytest.raises(httpx2.ConnectError) as refused:
            client.get("https://public.example/v1/models")
        assert seen == []
        assert "10.0.0.7" not in str(refused.value)
        response = client.get("https://public.example/v1/models")
    # The checked address, not a second lookup; the name for the Host header and for TLS.
    assert seen == [("93.184.216.34", "public.example", "public.example")]
    assert response.json() == {"ok": True}
    # What the client reports (logs, errors) still names the host, not its address.
    assert response.request.url.host == "public.example"
