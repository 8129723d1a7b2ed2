"""The channel layer without Redis: channels_postgres, made to outlive a database restart.

channels_postgres hears new messages through LISTEN/NOTIFY on one connection of its own, and
does everything else through a psycopg pool. After a restart of the database that connection
was dead: its task ended with the error while the layer still believed it listened, so every
socket, old or new, stayed open and heard nothing until the web process itself was restarted.
The pool handed out its dead connections too, and the first `group_add` raised AdminShutdown
(a handshake answered 500).

Here, without changing what the layer does otherwise:
* the listener is opened again whenever it ends, after a pause that grows while the database
  is away (its first step reads the messages sent meanwhile, so none is lost on the way back);
* the pool tests a connection before handing it out, and replaces one the restart ended;
* a socket's `receive` waits out an outage instead of ending its consumer with an error;
* each message reaches its socket once: coming back, the listener reads every message not yet
  expired, and channels_postgres leaves a small message in its table after delivering it, so
  the last minute's events arrived a second time;
* a socket's own channel takes its messages without an advisory lock. channels_postgres takes
  a lock per channel through the pool before it keeps a channel's messages, and drops every
  message that arrives before it holds one. Right after a restart the pool waits out its own
  growing reconnect delay, so a socket opened then heard nothing (CI saw it). A channel named
  by `new_channel` is received by this process alone (channels' contract for a
  `prefix.<client>!…` name), so there is nothing for a lock to arbitrate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import psycopg
from channels_postgres.core import ASYNCIO_EVENT_CHANNEL_MAPPING, PostgresChannelLayer
from psycopg_pool import AsyncConnectionPool

from levers9.middleware import database_unreachable

logger = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 5.0


def layer_unreachable(error: BaseException) -> bool:
    """The layer's database is out of reach: a connection refused, closed or shut down, or no
    pooled connection in time (psycopg's own errors, or Django's for the layer's ORM calls)."""
    return database_unreachable(error) or isinstance(
        error, psycopg.OperationalError | psycopg.InterfaceError
    )


class _Pause:
    """How long to wait before trying again: growing while attempts keep failing fast, back to
    the first pause after an attempt that held (a listener that listened for a while)."""

    def __init__(self) -> None:
        self.seconds = FIRST_PAUSE_S

    async def after(self, attempt_started: float) -> None:
        if time.monotonic() - attempt_started > LONGEST_PAUSE_S * 2:
            self.seconds = FIRST_PAUSE_S
        await asyncio.sleep(self.seconds)
        self.seconds = min(self.seconds * 2, LONGEST_PAUSE_S)


class _QueueOfNewMessages(asyncio.Queue):
    """One channel's queue that takes each message once, by its id (the first field of every
    payload the layer queues), remembering ids as long as a message can come back."""

    def __init__(self, remember_s: float) -> None:
        super().__init__()
        self._remember_s = remember_s
        self._seen: dict[str, float] = {}  # message id -> when queued, oldest first

    def put_nowait(self, payload: str) -> None:
        message_id = payload.split(":", 1)[0]
        now = time.monotonic()
        while self._seen and next(iter(self._seen.values())) < now - self._remember_s:
            del self._seen[next(iter(self._seen))]
        if message_id in self._seen:
            return
        self._seen[message_id] = now
        super().put_nowait(payload)


class ReconnectingPostgresChannelLayer(PostgresChannelLayer):
    """channels_postgres' layer, listening again after its connection is lost."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = dict(kwargs.get("PSYCOPG_OPTIONS") or {})
        # psycopg_pool's own check (a round trip) before each connection is handed out.
        options.setdefault("check", AsyncConnectionPool.check_connection)
        super().__init__(*args, **{**kwargs, "PSYCOPG_OPTIONS": options})

    def _get_or_create_queue(self, channel: str) -> asyncio.Queue[str]:
        # The same process-wide mapping channels_postgres keeps, holding queues that take a
        # message once; twice its expiry outlasts any clock difference with the database.
        queue = ASYNCIO_EVENT_CHANNEL_MAPPING.get(channel)
        if queue is None:
            queue = ASYNCIO_EVENT_CHANNEL_MAPPING[channel] = _QueueOfNewMessages(2 * self.expiry)
        return queue

    async def _get_or_create_channel_advisory_lock(self, channel: str) -> bool:
        if f"{self.client_prefix}!" in channel:
            self._channel_advisory_locks[channel] = True
            return True
        return await super()._get_or_create_channel_advisory_lock(channel)

    async def listen_to_all_channels(self) -> None:
        pause = _Pause()
        while True:
            started = time.monotonic()
            try:
                await super().listen_to_all_channels()
            except Exception as error:  # noqa: BLE001 - a listener that stops is silent for good
                if layer_unreachable(error):
                    logger.warning(
                        "The channel layer lost its database (%s); listening again in %.1f s.",
                        type(error).__name__,
                        pause.seconds,
                    )
                else:
                    logger.exception("The channel layer's listener failed; starting it again.")
            else:
                # It returns by itself only when told to shut down (the event is cleared then).
                if self.listener_task_is_running is None or not (
                    self.listener_task_is_running.is_set()
                ):
                    return
            await pause.after(started)

    async def receive(self, channel: str) -> dict[str, Any]:
        pause = _Pause()
        while True:
            started = time.monotonic()
            try:
                return await super().receive(channel)
            except Exception as error:
                if not layer_unreachable(error):
                    raise
            await pause.after(started)
