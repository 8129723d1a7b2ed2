"""Events pushed to a workspace's browsers over the websocket.

One channel-layer group per workspace and topic. Workers (separate processes) and web
processes call `workspace_event_send`; every consumer of that workspace subscribed to the
topic relays it to its browser.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import connection

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
    try:
        _run(layer.group_send(workspace_group(schema_name, topic), message))
    except Exception as error:  # noqa: BLE001 - whatever the layer raises, the writer goes on
        # Seen: the channels_postgres pool timed out under load while a worker pushed a
        # progress line, and the exception failed a 40-minute training with it.
        logger.warning(
            "Event %s for %s not delivered: %s: %s",
            payload.get("type"),
            schema_name,
            type(error).__name__,
            error,
        )


# A send from sync code with no ASGI loop above it (a task worker) would get a fresh event loop
# from async_to_sync each time. channels_postgres keeps one connection pool per process, and
# the pool's maintenance tasks live in the loop that opened it: once that loop was gone, the
# first connection to reach its lifetime (an hour) was closed and never replaced, and every
# later push waited 30 s for a connection that could not come — one progress line per 30 s
# for the rest of the worker's life. Such sends therefore share one loop that never ends.
_SEND_TIMEOUT_S = 60.0
_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _run(send: Awaitable[None]) -> None:
    if _inside_asgi_loop():
        async_to_sync(_awaited)(send)
        return
    future = asyncio.run_coroutine_threadsafe(_awaited(send), _process_loop())
    try:
        future.result(timeout=_SEND_TIMEOUT_S)
    except TimeoutError:
        future.cancel()
        raise


async def _awaited(send: Awaitable[None]) -> None:
    await send


def _inside_asgi_loop() -> bool:
    """Sync code called from an ASGI server's loop (a view under daphne) sends on that loop,
    where the websocket consumers use the same pool."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    pid = getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None)
    return loop is not None and pid == os.getpid() and loop.is_running()


def _process_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid  # noqa: PLW0603 - one loop per process, made on first use
    with _loop_lock:
        # A forked worker inherits the variable but not the thread that ran the loop.
        if _loop is None or _loop_pid != os.getpid() or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            _loop_pid = os.getpid()
            threading.Thread(target=_loop.run_forever, name="levers9-events", daemon=True).start()
        return _loop
