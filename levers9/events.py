"""Events pushed to a workspace's browsers over the websocket.

One channel-layer group per workspace and topic. Workers (separate processes) and web
processes call `workspace_event_send`; every consumer of that workspace subscribed to the
topic relays it to its browser.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction

logger = logging.getLogger(__name__)

TOPICS = ("jobs",)


def workspace_group(schema_name: str, topic: str = "jobs") -> str:
    # Group names allow only ASCII letters, digits, hyphens, underscores and periods.
    return f"{topic}.{schema_name}"


def workspace_event_send(
    payload: dict[str, Any], *, topic: str = "jobs", schema_name: str | None = None
) -> None:
    """Send `payload` to every browser of the workspace watching `topic`.

    Delivery is best effort: progress is also kept in the database, so a lost event only
    means a browser shows it on its next update.
    """
    schema_name = schema_name or connection.schema_name
    layer = get_channel_layer()
    if layer is None:
        logger.warning("No channel layer configured; event dropped: %s", payload.get("type"))
        return
    message = {"type": "workspace.event", "topic": topic, "payload": payload}
    _run_on_a_lasting_loop(layer.group_send(workspace_group(schema_name, topic), message))


_background_loop: asyncio.AbstractEventLoop | None = None
_background_guard = threading.Lock()


async def _awaited(coroutine) -> None:
    await coroutine


def _run_on_a_lasting_loop(coroutine) -> None:
    """Run the send on an event loop that outlives it.

    Inside the web server, a sync view runs in a thread of the server's loop: send there.
    Elsewhere (a worker, a command) `async_to_sync` would make a new loop for every event,
    and the layer's database pool would be rebuilt each time; one background loop per process
    keeps one pool instead.
    """
    server_loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    if server_loop is not None and server_loop.is_running():
        async_to_sync(_awaited)(coroutine)
        return
    global _background_loop
    with _background_guard:
        if _background_loop is None or _background_loop.is_closed():
            _background_loop = asyncio.new_event_loop()
            threading.Thread(
                target=_background_loop.run_forever, name="events-loop", daemon=True
            ).start()
    asyncio.run_coroutine_threadsafe(coroutine, _background_loop).result(timeout=30)


def workspace_event_send_on_commit(payload: dict[str, Any], *, topic: str = "jobs") -> None:
    schema_name = connection.schema_name
    transaction.on_commit(
        lambda: workspace_event_send(payload, topic=topic, schema_name=schema_name)
    )
