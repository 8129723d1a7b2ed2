"""Events pushed to a workspace's browsers over the websocket.

One channel-layer group per workspace and topic. Workers (separate processes) and web
processes call `workspace_event_send`; every consumer of that workspace subscribed to the
topic relays it to its browser.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
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
        async_to_sync(layer.group_send)(workspace_group(schema_name, topic), message)
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
