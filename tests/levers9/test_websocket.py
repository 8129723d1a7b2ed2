"""Websockets: an event from a real worker process reaches a signed-in browser of the same
workspace, and a user of another workspace cannot subscribe; an unknown path and a database out
of reach are refused with a close code, never a 500.

These tests need committed rows (the socket's middleware reads the session on another
thread, and the worker is another process), so they write outside the test transaction and
clean up after themselves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from unittest import mock

import psycopg
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError
from django_tenants.utils import schema_context

from levers9.models import Workspace
from tests.conftest import database_url_for_workers
from tests.levers9.sessions import signed_in_session_key

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

# A handshake that joins a group opens the channel layer's pool and listener for this test's
# event loop first: over the communicator's default second on a busy machine.
CONNECT_S = 30


def _session_cookie(slug: str, username: str) -> str:
    return signed_in_session_key(Workspace.objects.get(slug=slug).schema_name, username)


def _forget_session(slug: str, key: str) -> None:
    with schema_context(Workspace.objects.get(slug=slug).schema_name):
        SessionStore(session_key=key).delete()


def _socket(
    host: str, session_key: str | None, topic: str = "jobs", *, path: str | None = None
) -> WebsocketCommunicator:
    from config.asgi import application

    headers = [(b"host", host.encode()), (b"origin", f"http://{host}".encode())]
    if session_key:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={session_key}".encode()))
    return WebsocketCommunicator(application, path or f"/ws/events/{topic}/", headers=headers)


@pytest.fixture
def committed(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def acme_session(committed):
    key = _session_cookie("acme", "owner@acme.test")
    yield key
    _forget_session("acme", key)


@pytest.fixture
def rival_session(committed):
    key = _session_cookie("rival", "owner@rival.test")
    yield key
    _forget_session("rival", key)


@pytest.fixture
def worker(committed):
    """A real django-q2 cluster in its own process, on this test run's database."""
    env = {**os.environ, "DATABASE_URL": database_url_for_workers(), "LEVERS9_Q_WORKERS": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    yield process
    # SIGTERM to the cluster's main process only; signalling its group hangs it.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


async def test_it_relays_an_event_from_a_worker_process(acme_session, worker):
    from levers9.tasks import enqueue_in_workspace

    socket = _socket("acme.localhost", acme_session)
    connected, _ = await socket.connect(timeout=CONNECT_S)
    assert connected
    await sync_to_async(enqueue_in_workspace)(
        "levers9.tasks.workspace_ping", "from the worker", schema_name="ws_acme"
    )
    event = await socket.receive_json_from(timeout=60)
    assert event == {
        "topic": "jobs",
        "type": "ping",
        "schema": "ws_acme",
        "users": 1,
        "note": "from the worker",
    }
    await socket.disconnect()


async def test_it_refuses_a_user_of_another_workspace(rival_session):
    socket = _socket("acme.localhost", rival_session)
    connected, code = await socket.connect(timeout=CONNECT_S)
    assert not connected
    assert code == 4403


async def test_it_refuses_an_anonymous_socket_and_unknown_topics(acme_session):
    anonymous = _socket("acme.localhost", None)
    assert (await anonymous.connect(timeout=CONNECT_S)) == (False, 4403)
    wrong_topic = _socket("acme.localhost", acme_session, topic="secrets")
    assert (await wrong_topic.connect(timeout=CONNECT_S)) == (False, 4403)


async def test_it_does_not_leak_events_across_workspaces(acme_session, rival_session):
    from levers9.events import workspace_event_send

    acme = _socket("acme.localhost", acme_session)
    rival = _socket("rival.localhost", rival_session)
    assert (await acme.connect(timeout=CONNECT_S))[0]
    assert (await rival.connect(timeout=CONNECT_S))[0]
    await sync_to_async(workspace_event_send)({"type": "secret"}, schema_name="ws_acme")
    assert (await acme.receive_json_from(timeout=20))["type"] == "secret"
    assert await rival.receive_nothing(timeout=1.0)
    await asyncio.gather(acme.disconnect(), rival.disconnect())


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/", "/ws/events/", "/anything/at/all"])
async def test_it_refuses_an_unknown_path_without_an_error(acme_session, path, caplog):
    """Channels' router raised for a path it does not know, and daphne answered 500 with a
    traceback in its log; now the handshake is refused with 4404."""
    socket = _socket("acme.localhost", acme_session, path=path)
    assert (await socket.connect(timeout=CONNECT_S)) == (False, 4404)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


async def test_it_refuses_another_workspaces_user_at_an_unknown_path_the_same_way(rival_session):
    socket = _socket("acme.localhost", rival_session, path="/ws/nope/")
    assert (await socket.connect(timeout=CONNECT_S)) == (False, 4404)


async def _told_to_come_back_later(socket: WebsocketCommunicator) -> None:
    """Accepted (daphne answers a refused handshake with an HTTP 403), told why, and closed
    with 1013, "try again later": the page's socket reconnects by itself."""
    connected, _ = await socket.connect(timeout=CONNECT_S)
    assert connected
    told = await socket.receive_json_from(timeout=10)
    assert told["type"] == "unavailable"
    assert "database cannot be reached" in told["detail"]
    closed = await socket.receive_output(timeout=10)
    assert closed["type"] == "websocket.close"
    assert closed["code"] == 1013
    assert closed["reason"]


async def test_it_asks_the_socket_to_come_back_later_while_the_database_is_gone(acme_session):
    with mock.patch(
        "levers9.websocket._resolve_socket", side_effect=OperationalError("connection refused")
    ):
        await _told_to_come_back_later(_socket("acme.localhost", acme_session))


async def test_it_asks_the_socket_to_come_back_later_while_the_layer_cannot_reach_it(
    acme_session,
):
    """The workspace was found, but the channel layer's own connection is gone (a restart
    ended it): its group_add raised AdminShutdown and daphne answered 500."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    with mock.patch.object(
        type(layer), "group_add", side_effect=psycopg.errors.AdminShutdown("terminating")
    ):
        await _told_to_come_back_later(_socket("acme.localhost", acme_session))
