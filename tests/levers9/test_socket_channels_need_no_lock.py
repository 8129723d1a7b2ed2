"""A socket's own channel hears its messages from the moment it exists.

channels_postgres keeps a message for a channel only once it holds that channel's advisory lock,
taken through its pool. Right after a database restart the pool waits out its reconnect delay,
and a socket opened then heard nothing while older sockets did (CI's restart test). A channel
named by `new_channel` is received by this process alone, so it takes no lock, and asks nothing
of the database for it."""

from __future__ import annotations

import asyncio

from django.conf import settings

from levers9.channel_layer import ReconnectingPostgresChannelLayer
from tests.processes import free_port


def _layer_on_a_closed_port() -> ReconnectingPostgresChannelLayer:
    database = {**settings.DATABASES["channels_postgres"], "HOST": "127.0.0.1"}
    database["PORT"] = str(free_port())  # nothing listens: any round trip would fail
    return ReconnectingPostgresChannelLayer(
        **{**database, "TIME_ZONE": settings.TIME_ZONE, "PSYCOPG_OPTIONS": {"timeout": 1.0}}
    )


def test_a_sockets_own_channel_is_kept_without_asking_the_database():
    layer = _layer_on_a_closed_port()

    async def lock_of_a_new_socket() -> tuple[str, bool]:
        channel = await layer.new_channel()
        return channel, await asyncio.wait_for(
            layer._get_or_create_channel_advisory_lock(channel), timeout=5
        )

    channel, locked = asyncio.run(lock_of_a_new_socket())
    assert locked is True
    # What the listener reads before it queues a message for the channel.
    assert layer._channel_advisory_locks[channel] is True


def test_a_channel_of_another_process_still_takes_the_lock():
    layer = _layer_on_a_closed_port()

    async def lock_of(channel: str) -> bool:
        return await layer._get_or_create_channel_advisory_lock(channel)

    try:
        locked = asyncio.run(asyncio.wait_for(lock_of("specific.other!abc"), timeout=10))
    except Exception:  # noqa: BLE001 - the closed port refuses, or the pool times out
        locked = None
    assert locked is not True
