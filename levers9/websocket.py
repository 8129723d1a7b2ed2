"""Websockets: which workspace a socket belongs to, who is on it, and the events consumer.

django-tenants routes HTTP only (its issue #931), so sockets resolve their workspace from the
Host header here, and load the session user from that workspace's own schema. A session of
another workspace does not exist in this schema, so its holder is anonymous here and refused.
A browser's socket is accepted only from the workspace's own origin (SameHostOriginValidator).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.utils.crypto import constant_time_compare
from django_tenants.utils import get_public_schema_name, remove_www, schema_context

from levers9.channel_layer import layer_unreachable
from levers9.daphne_patches import method_wrap_once
from levers9.events import TOPICS, workspace_group
from levers9.middleware import database_unreachable
from levers9.roles import user_role

logger = logging.getLogger(__name__)


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


UNAVAILABLE_DETAIL = (
    "Live updates are paused: the database cannot be reached at the moment. The page "
    "reconnects by itself; nothing is lost, progress is kept in the database."
)
TRY_AGAIN_LATER = 1013


async def ask_to_come_back_later(send) -> None:
    """Accept the handshake, say why in one message, and close with 1013 ("try again later"),
    on which the page's socket reconnects by itself. Accepted first because daphne answers a
    close before the accept with an HTTP 403, which a browser reads as "not allowed", and it
    passes on no close reason (the message carries it; the close's reason is for servers that
    do)."""
    await send({"type": "websocket.accept"})
    await send(
        {
            "type": "websocket.send",
            "text": json.dumps({"type": "unavailable", "detail": UNAVAILABLE_DETAIL}),
        }
    )
    await send(
        {
            "type": "websocket.close",
            "code": TRY_AGAIN_LATER,
            "reason": "The database cannot be reached; try again shortly.",
        }
    )


def _let_daphne_send_try_again_later() -> None:
    """daphne closes through autobahn, which lets an application send only 1000 or 3000-4999
    (1013 raised inside daphne and reached the browser as 1011, "server error"), and daphne
    drops a close's reason. 1013 is RFC 6455's registered "try again later": a close with it is
    sent as that frame, its reason included. Every other message goes through unchanged."""
    try:
        from autobahn.util import encode_truncate
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:  # served by another ASGI server
        return

    def sending_try_again_later(handle_reply):
        def handle_reply_sending_try_again_later(self, message):
            if (
                message.get("type") == "websocket.close"
                and message.get("code") == TRY_AGAIN_LATER
                and self.state == self.STATE_OPEN
            ):
                # A close frame's reason holds at most 123 bytes.
                reason = encode_truncate(str(message.get("reason") or ""), 123)
                self.sendCloseFrame(code=TRY_AGAIN_LATER, reasonUtf8=reason)
                return
            handle_reply(self, message)

        return handle_reply_sending_try_again_later

    method_wrap_once(WebSocketProtocol, "handle_reply", sending_try_again_later)


# Here, not in config/asgi.py alone: this module is what sends 1013, whichever ASGI entry point
# serves it.
_let_daphne_send_try_again_later()


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
            # An exception would be a 500 and a traceback.
            if (await receive())["type"] == "websocket.connect":
                await ask_to_come_back_later(send)
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
        group_name = workspace_group(workspace.schema_name, topic)
        try:
            await self.channel_layer.group_add(group_name, self.channel_name)
        except Exception as error:
            if not layer_unreachable(error):
                raise
            # The layer's database is away (a restart): the page tries again by itself.
            await ask_to_come_back_later(self.base_send)
            return
        self.group_name = group_name
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if not getattr(self, "group_name", None):
            return
        try:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
        except Exception as error:
            if not layer_unreachable(error):
                raise
            # Its row stays behind: sends to it expire unread, as for any closed socket.
            logger.warning("Socket left %s with the database away: %s", self.group_name, error)

    async def workspace_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"topic": message["topic"], **message["payload"]})
