"""A websocket client over a real TCP connection, for tests against a live daphne.

Channels' WebsocketCommunicator calls the application in this process; a handshake through
daphne shows what a browser sees instead: the HTTP status of a refused handshake (daphne turns
a close before accept into a 403, an exception into a 500) and the close code of an accepted
one. A thread reads every frame as it comes and answers daphne's pings, so a socket left open
for a minute is not closed for want of a pong.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

_TEXT, _CLOSE, _PING, _PONG = 0x1, 0x8, 0x9, 0xA


@dataclass(frozen=True)
class Closed:
    """The server's close frame: its code and reason (empty when it sent none)."""

    code: int | None
    reason: str


class RefusedHandshake(AssertionError):
    def __init__(self, status: int, head: str):
        self.status = status
        super().__init__(f"the handshake was answered HTTP {status}: {head[:300]}")


class LiveSocket:
    """One websocket to `path` on 127.0.0.1:`port`, as the page at `host` opens it."""

    def __init__(self, port: int, host: str, path: str, *, cookie: str = "", timeout=30.0):
        self._socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: http://{host}\r\n" + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n"
        )
        self._socket.sendall(request.encode("latin-1"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._socket.recv(4096)
            if not chunk:
                raise RefusedHandshake(0, "the connection closed during the handshake")
            head += chunk
        head, self._buffer = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])
        if self.status != 101:
            self._socket.close()
            raise RefusedHandshake(self.status, head.decode("latin-1"))
        self._socket.settimeout(None)
        self._frames: queue.Queue[Any] = queue.Queue()
        self._send_lock = threading.Lock()
        threading.Thread(target=self._read_frames, daemon=True).start()

    def receive(self, timeout: float) -> dict[str, Any] | Closed:
        """The next text message as JSON, or Closed once the server closed the socket."""
        try:
            return self._frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing arrived in {timeout:.0f} s") from None

    def receive_json(self, timeout: float) -> dict[str, Any]:
        message = self.receive(timeout)
        assert not isinstance(message, Closed), f"closed instead of a message: {message}"
        return message

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send(_CLOSE, struct.pack("!H", 1000))
        with contextlib.suppress(OSError):
            self._socket.close()

    # --- frames ------------------------------------------------------------------------

    def _read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = self._socket.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def _read_frames(self) -> None:
        try:
            while True:
                first, second = self._read_exactly(2)
                opcode, length = first & 0x0F, second & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", self._read_exactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", self._read_exactly(8))
                payload = self._read_exactly(length)  # a server's frames are never masked
                if opcode == _TEXT:
                    self._frames.put(json.loads(payload))
                elif opcode == _PING:
                    self._send(_PONG, payload)
                elif opcode == _CLOSE:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    self._frames.put(Closed(code, payload[2:].decode("utf-8", "replace")))
                    return
        except OSError:
            self._frames.put(Closed(None, "the connection ended without a close frame"))

    def _send(self, opcode: int, payload: bytes) -> None:
        # A client masks every frame it sends (RFC 6455 §5.3).
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        with self._send_lock:
            self._socket.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)
