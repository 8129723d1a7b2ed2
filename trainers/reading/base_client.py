"""A reader of a base that asks the machine's scoring process for it (trainers.reading.base_server)
instead of loading the base here: the web process, the workers' tasks and the pair maker all
score through one process per base, and none of them holds a model.

It answers what trainers.reading.base_features.BaseReader answers (`features`, `answers`, the
same floats), so the fitted judge and its answer check take it as they took the in-process
reader. Pure Python; the settings are read by the caller (arena.judge.judge_base).
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from trainers.reading.base_features import ReadStats
from trainers.reading.base_server import HOST, ServerAddress, server_ensure

Item = tuple[Sequence[Mapping[str, str]], str]

REQUEST_SECONDS = 900.0
"""A request's longest wait: a pair maker's batch of new replies read on two cores."""


class BaseClient:
    """The base `base` as read by this machine's scoring process, into the cache
    `features_dir` (the workspace's). Safe to share between threads: each has its own
    connection."""

    def __init__(
        self, base: str, *, models_dir: Path | str, features_dir: Path | str, idle_seconds: float
    ):
        self.base = base
        self.models_dir = str(models_dir)
        self.features_dir = str(Path(features_dir).resolve())
        self.idle_seconds = idle_seconds
        self._address: ServerAddress | None = None
        self._address_lock = threading.Lock()
        self._local = threading.local()

    def features(
        self,
        items: Sequence[Item],
        *,
        on_progress: Callable[[int, int], None] | None = None,
        stats: ReadStats | None = None,
    ) -> np.ndarray:
        """One row of the base's features for each item, in order."""
        values = self._ask("features", items, stats)
        if on_progress is not None:
            on_progress(len(items), len(items))
        return values

    def answers(self, items: Sequence[Item], *, stats: ReadStats | None = None) -> np.ndarray:
        """How much likelier the base finds each reply after its call than after a bare one."""
        return self._ask("answers", items, stats)

    # --- the requests -----------------------------------------------------------------------

    def _ask(self, kind: str, items: Sequence[Item], stats: ReadStats | None) -> np.ndarray:
        body = json.dumps(
            {
                "features_dir": self.features_dir,
                "items": [[[dict(turn) for turn in context], reply] for context, reply in items],
            }
        ).encode()
        # A process that went idle and exited (or was stopped) between two requests is started
        # again; a read is the same whoever does it, so asking twice is safe.
        for attempt in range(2):
            address = self._address_now(renew=attempt > 0)
            try:
                status, headers, data = self._post(address, f"/{kind}", body)
            except (OSError, http.client.HTTPException):
                self._connection_drop()
                if attempt:
                    raise
                continue
            if status == http.client.UNAUTHORIZED and not attempt:
                continue  # a successor with its own token took the port
            if status != http.client.OK:
                raise RuntimeError(f"The scoring process for {self.base}: {_error_text(data)}")
            if stats is not None:
                _stats_add(stats, headers.get("X-Read-Stats"))
            return np.load(io.BytesIO(data), allow_pickle=False)
        raise RuntimeError(f"The scoring process for {self.base} did not answer.")

    def _address_now(self, *, renew: bool) -> ServerAddress:
        with self._address_lock:
            if renew or self._address is None:
                self._address = server_ensure(
                    self.base, models_dir=self.models_dir, idle_seconds=self.idle_seconds
                )
            return self._address

    def _post(self, address: ServerAddress, path: str, body: bytes):
        connection = getattr(self._local, "connection", None)
        if connection is None or getattr(self._local, "port", None) != address.port:
            self._connection_drop()
            connection = _NoDelayConnection(HOST, address.port, timeout=REQUEST_SECONDS)
            self._local.connection, self._local.port = connection, address.port
        headers = {**address.headers, "Content-Type": "application/json"}
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        return response.status, response.headers, response.read()

    def _connection_drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
        self._local.connection = None


class _NoDelayConnection(http.client.HTTPConnection):
    """A connection that sends each write at once: http.client sends a request's headers and
    body apart, and with Nagle's algorithm the body waited for the server's delayed ACK."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _error_text(data: bytes) -> str:
    try:
        return str(json.loads(data).get("error"))
    except (ValueError, AttributeError):
        return data[:500].decode(errors="replace")


def _stats_add(stats: ReadStats, header: str | None) -> None:
    if not header:
        return
    read = json.loads(header)
    stats.read += int(read.get("read", 0))
    stats.cached += int(read.get("cached", 0))
    stats.tokens += int(read.get("tokens", 0))
    stats.spared += int(read.get("spared", 0))
    stats.seconds += float(read.get("seconds", 0.0))
