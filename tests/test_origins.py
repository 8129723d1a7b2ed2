"""Each workspace accepts only its own origin: a form or an API write posted from another
workspace's page is a CSRF 403, and a socket opened from another workspace's page is refused,
even where an operator lists a wildcard of trusted origins."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from levers9.websocket import origin_is_own_host
from tests.conftest import PASSWORD

ACME = "acme.localhost:8000"
RIVAL = "rival.localhost:8000"


def _csrf_client(host: str) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True, HTTP_HOST=host)
    client.get("/login/")
    return client, client.cookies["csrftoken"].value


def _sign_in(client: Client, token: str, origin: str):
    return client.post(
        "/login/",
        {"username": "owner@acme.test", "password": PASSWORD, "csrfmiddlewaretoken": token},
        HTTP_ORIGIN=origin,
    )


def test_it_accepts_a_form_from_the_workspaces_own_origin(workspace):
    client, token = _csrf_client(ACME)
    assert _sign_in(client, token, f"http://{ACME}").status_code == 302


@pytest.mark.parametrize(
    "trusted", [None, ["http://*.localhost:8000"], ["http://*.localhost:8000", "http://x.test"]]
)
def test_it_refuses_a_form_from_another_workspaces_origin(workspace, settings, trusted):
    if trusted is not None:
        settings.CSRF_TRUSTED_ORIGINS = trusted
    client, token = _csrf_client(ACME)
    response = _sign_in(client, token, f"http://{RIVAL}")
    assert response.status_code == 403
    assert b"CSRF" in response.content


def test_it_still_accepts_an_exact_origin_an_operator_lists(workspace, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://proxy.example"]
    client, token = _csrf_client(ACME)
    assert _sign_in(client, token, "https://proxy.example").status_code == 302


def _signed_in_api_client(host: str) -> tuple[Client, str]:
    client, token = _csrf_client(host)
    assert _sign_in(client, token, f"http://{host}").status_code == 302
    return client, client.cookies["csrftoken"].value


@pytest.mark.parametrize("trusted", [None, ["http://*.localhost:8000"]])
def test_it_refuses_a_session_api_write_from_another_workspaces_origin(
    workspace, settings, trusted
):
    if trusted is not None:
        settings.CSRF_TRUSTED_ORIGINS = trusted
    client, token = _signed_in_api_client(ACME)

    def post_from(host: str):
        return client.post(
            "/api/rl/live/calls/",
            {"call_id": "from-rival"},
            content_type="application/json",
            HTTP_ORIGIN=f"http://{host}",
            HTTP_X_CSRFTOKEN=token,
        )

    refused = post_from(RIVAL)
    assert refused.status_code == 403, refused.content
    assert "CSRF" in refused.json()["detail"]
    own = post_from(ACME)
    assert own.status_code == 200, own.content


# --- websockets -------------------------------------------------------------------------


def _scope(host: str | None, origin: str | None) -> dict:
    headers = []
    if host is not None:
        headers.append((b"host", host.encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "headers": headers}


@pytest.mark.parametrize(
    ("host", "origin", "accepted"),
    [
        (ACME, f"http://{ACME}", True),
        ("acme.localhost", "http://ACME.localhost", True),
        ("acme.example.com", "https://acme.example.com:443", True),
        ("acme.example.com:443", "https://acme.example.com", True),
        (ACME, f"http://{RIVAL}", False),
        (ACME, "http://acme.localhost:9000", False),
        (ACME, "http://evil.test", False),
        (ACME, "null", False),
        (ACME, None, False),
        (None, f"http://{ACME}", False),
    ],
)
def test_it_accepts_a_socket_only_from_its_own_host(host, origin, accepted):
    assert origin_is_own_host(_scope(host, origin)) is accepted


@pytest.mark.asyncio
async def test_it_refuses_a_socket_opened_from_another_workspaces_page(monkeypatch):
    from config.asgi import application

    looked_up = []

    def resolve(host, session_key):
        looked_up.append(host)
        return None, AnonymousUser(), None

    # Refused before the session is read: even a signed-in acme cookie would not get through.
    monkeypatch.setattr("levers9.websocket._resolve_socket", resolve)

    communicator = WebsocketCommunicator(
        application,
        "/ws/events/jobs/",
        headers=[(b"host", ACME.encode()), (b"origin", f"http://{RIVAL}".encode())],
    )
    assert await communicator.connect() == (False, 4403)
    assert looked_up == []
