"""An event push is best effort: a channel layer that fails never fails the writer (a
worker writing a training's progress), and the failure is logged."""

from __future__ import annotations

import logging

from levers9 import events


class _BrokenLayer:
    async def group_send(self, group, message):
        raise TimeoutError("couldn't get a connection after 30.00 sec")


def test_a_failing_channel_layer_does_not_fail_the_writer(monkeypatch, caplog):
    monkeypatch.setattr(events, "get_channel_layer", lambda: _BrokenLayer())
    with caplog.at_level(logging.WARNING, logger="levers9.events"):
        events.workspace_event_send({"type": "job"}, schema_name="ws_acme")
    assert "Event job for ws_acme not delivered: TimeoutError" in caplog.text
