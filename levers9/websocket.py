"""Websockets: which workspace a socket belongs to, who is on it, and the events consumer.

django-tenants routes HTTP only (its issue #931), so sockets resolve their workspace from the
Host header here, and load the session user from that workspace's own schema. A session of
another workspace does not exist in this schema, so its holder is anonymous here and refused.
A browser's socket is accepted only from the workspace's own origin (SameHostOriginValidator).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.utils.crypto import constant_time_compare
from django_tenants.utils import get_public_schema_name, remove_www, schema_context

from levers9.events import TOPICS, workspace_group
from levers9.middleware import database_unreachable
from levers9.roles import user_role


def _header(scope: dict[str, Any], wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return value.decode("latin-1")
    return None


_DEFAULT_PORTS = {"http": ":80", "ws": ":80", "https": ":443", "wss": ":443"}


def _netloc(host: str, scheme: str) -> str:
    host = host.strip().lower()
    default = _DEFAULT_PORTS.get(scheme, "")
    return host[: -len(default)] if default and host.endswith(default) else host


def origin_is_own_host(scope: dict[str, Any]) -> bool:
    """True when the socket's Origin is the host it connects to (scheme aside, as a workspace
    page on https opens wss). Channels' AllowedHostsOriginValidator accepts any allowed host,
    so `.localhost` let workspace B's page open a socket to workspace A with A's cookies."""
    origin, host = _header(scope, b"origin"), _header(scope, b"host")
    if not origin or not host:
        return False
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    if not parsed.netloc:
        return False
    scheme = "https" if parsed.scheme in {"https", "wss"} else "http"
    return _netloc(parsed.netloc, scheme) == _netloc(host, scheme)


def _host_from_scope(scope: dict[str, Any]) -> str:
    host = _header(scope, b"host")
    return remove_www(host.split(":")[0].lower()) if host else ""


class SameHostOriginValidator:
    """Refuses (before the handshake completes) a socket whose Origin is not its own host."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if origin_is_own_host(scope):
            return await self.application(scope, receive, send)
        # Refuse the handshake (the client sees a 403) without starting a consumer: channels'
        # WebsocketDenier would first open a channel on the layer for nothing.
        if (await receive())["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": 4403})


async def refuse_unknown_socket(scope, receive, send) -> None:
    """A socket at a path no consumer serves (`/ws/nope/`): refused with 4404 at its handshake
    (the client sees the refusal), where channels' router would raise and daphne would answer
    500 and log a traceback."""
    if (await receive())["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 4404})


def _cookies_from_scope(scope: dict[str, Any]) -> dict[str, str]:
    from django.http import parse_cookie

    cookie = _header(scope, b"cookie")
    return parse_cookie(cookie) if cookie else {}


def _resolve_socket(host: str, session_key: str | None):
    """(workspace, user, role) for a socket; the user is anonymous unless its session is here."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from levers9.models import Domain

    domain = Domain.objects.select_related("tenant").filter(domain=host).first()
    if domain is None or domain.tenant.schema_name == get_public_schema_name():
        return None, AnonymousUser(), None
    workspace = domain.tenant
    user = AnonymousUser()
    with schema_context(workspace.schema_name):
        if session_key:
            session = SessionStore(session_key=session_key)
            user_id = session.get(SESSION_KEY)
            backend = session.get(BACKEND_SESSION_KEY)
            if user_id and (not backend or backend in settings.AUTHENTICATION_BACKENDS):
                candidate = get_user_model().objects.filter(pk=user_id, is_active=True).first()
                # The same check Django's auth does: a changed password ends the session.
                if candidate and constant_time_compare(
                    session.get(HASH_SESSION_KEY, ""), candidate.get_session_auth_hash()
                ):
                    user = candidate
        role = user_role(user)
    return workspace, user, role


class WorkspaceSocketMiddleware:
    """Puts `workspace`, `user` and `role` in the scope of every websocket."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        from django.conf import settings

        session_key = _cookies_from_scope(scope).get(settings.SESSION_COOKIE_NAME)
        try:
            workspace, user, role = await database_sync_to_async(_resolve_socket)(
                _host_from_scope(scope), session_key
            )
        except Exception as error:
            if not database_unreachable(error):
                raise
            # The database is out of reach: 1013 is "try again later", and the page's socket
            # reconnects by itself, where an exception would be a 500 and a traceback.
            if (await receive())["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 1013})
            return None
        scope = {**scope, "workspace": workspace, "user": user, "role": role}
        return await self.inner(scope, receive, send)


class WorkspaceEventsConsumer(AsyncJsonWebsocketConsumer):
    """`/ws/events/<topic>/`: relays the workspace's events on one topic to a signed-in user."""

    async def connect(self) -> None:
        topic = self.scope["url_route"]["kwargs"]["topic"]
        workspace = self.scope.get("workspace")
        if workspace is None or self.scope.get("role") is None or topic not in TOPICS:
            # 4403: the browser learns it was refused, not that the server broke.
            await self.close(code=4403)
            return
        self.group_name = workspace_group(workspace.schema_name, topic)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "group_name", None):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def workspace_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"topic": message["topic"], **message["payload"]})
