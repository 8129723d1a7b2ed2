"""An event push is best effort: a channel layer that fails never fails the writer (a
worker writing a training's progress), and the failure is logged."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from channels.layers import channel_layers, get_channel_layer
from django.db import connection

from levers9 import events


class _BrokenLayer:
    async def group_send(self, group, message):
        raise TimeoutError("couldn't get a connection after 30.00 sec")


def test_a_failing_channel_layer_does_not_fail_the_writer(monkeypatch, caplog):
    monkeypatch.setattr(events, "get_channel_layer", lambda: _BrokenLayer())
    with caplog.at_level(logging.WARNING, logger="levers9.events"):
        events.workspace_event_send({"type": "job"}, schema_name="ws_acme")
    assert "Event job for ws_acme not delivered: TimeoutError" in caplog.text


@pytest.fixture
def short_lived_layer_connections(django_db_setup, django_db_blocker, settings):
    """The layer's pool with connections that expire after a second instead of an hour."""
    import channels_postgres.db as layer_db

    # Built here rather than read from settings: where Redis carries the events (CI) the
    # settings name no PostgreSQL layer, and the demo's embedded server still uses one.
    database = {**settings.DATABASES["channels_postgres"], "NAME": connection.settings_dict["NAME"]}
    options = {"min_size": 1, "max_size": 2, "max_lifetime": 1.0, "timeout": 5.0}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_postgres.core.PostgresChannelLayer",
            "CONFIG": {**database, "TIME_ZONE": settings.TIME_ZONE, "PSYCOPG_OPTIONS": options},
        }
    }
    earlier_pool = layer_db.connection_pool
    layer_db.connection_pool = None
    channel_layers.backends = {}
    with django_db_blocker.unblock():
        yield get_channel_layer()
    if layer_db.connection_pool is not None:
        _on_events_loop(layer_db.connection_pool.close())
    layer_db.connection_pool = earlier_pool
    channel_layers.backends = {}


def _on_events_loop(coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, events._process_loop()).result(timeout=30)


@pytest.mark.slow
def test_a_worker_pushes_past_the_lifetime_of_the_layer_connections(short_lived_layer_connections):
    # A worker pushed nothing for the rest of its life once the first pooled connection
    # reached its lifetime: the pool that should replace it lived in a loop already gone.
    layer = short_lived_layer_connections
    events.workspace_event_send({"type": "job", "n": -1}, schema_name="ws_acme")
    channel = _on_events_loop(layer.new_channel())
    _on_events_loop(layer.group_add(events.workspace_group("ws_acme"), channel))
    for n in range(3):
        time.sleep(1.2)  # every connection handed out before now has expired
        events.workspace_event_send({"type": "job", "n": n}, schema_name="ws_acme")
        received = _on_events_loop(asyncio.wait_for(layer.receive(channel), timeout=20))
        assert received["payload"]["n"] == n
