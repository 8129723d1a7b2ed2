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


class _LockLedger:
    """Stands in for the layer's database call that takes a lock: records who asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, channel: str) -> bool:
        self.asked.append(channel)
        return False  # another process holds it


def _layer_with_a_lock_ledger() -> tuple[ReconnectingPostgresChannelLayer, _LockLedger]:
    # Building the layer opens no connection; only its calls to the database would.
    layer = ReconnectingPostgresChannelLayer(
        **{**settings.DATABASES["channels_postgres"], "TIME_ZONE": settings.TIME_ZONE}
    )
    ledger = _LockLedger()
    layer.django_db.acquire_advisory_lock = ledger
    return layer, ledger


def test_a_sockets_own_channel_is_kept_without_asking_the_database():
    layer, ledger = _layer_with_a_lock_ledger()

    async def lock_of_a_new_socket() -> tuple[str, bool]:
        channel = await layer.new_channel()
        return channel, await layer._get_or_create_channel_advisory_lock(channel)

    channel, locked = asyncio.run(lock_of_a_new_socket())
    assert locked is True
    assert ledger.asked == []
    # What the listener reads before it queues a message for the channel.
    assert layer._channel_advisory_locks[channel] is True


def test_a_channel_of_another_process_still_takes_the_lock():
    layer, ledger = _layer_with_a_lock_ledger()

    locked = asyncio.run(layer._get_or_create_channel_advisory_lock("specific.other!abc"))
    assert locked is False
    assert ledger.asked == ["specific.other!abc"]
