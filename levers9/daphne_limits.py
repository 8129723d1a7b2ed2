"""What daphne answers before any of our code sees a request: an over-long request line or header.

daphne reads HTTP with Twisted's HTTPChannel, which allows a line (the request line, each
header) of 16,384 bytes and as much for the request line and every header together. Past a
line's limit it closed the connection with no answer at all (LineReceiver.lineLengthExceeded),
and past the total it answered a bare 400: a client sending a 100 kB address or query was left
guessing. Here the request line past its limit is a 414 (URI Too Long) and a header past either
limit a 431 (Request Header Fields Too Large), each with a JSON body that says the limit, as
every API error does (a page's address gets the same: no page reads a 16 kB address).

The answer is written before the client has finished sending, so the connection is closed the
way Apache's "lingering close" does it: the answer, then our half of the connection, then the
rest of what the client sends is read and dropped for a few seconds. Closed at once, the
unread bytes would make the kernel reset the connection, and the client would lose the answer.

Applied to daphne's protocol factory at import of the ASGI application (config/asgi.py), so
every way of running daphne on this application gets it.
"""

from __future__ import annotations

import json
import types

from levers9.daphne_patches import method_wrap_once

# Seconds the rest of a refused request is read and dropped before the connection is closed.
LINGER_S = 5.0

_TOO_LONG = {
    414: (
        "URI Too Long",
        "The request line (method, address and query) is longer than {limit} bytes: send a "
        "shorter address, and long values in a request body (POST) instead of the query.",
    ),
    431: (
        "Request Header Fields Too Large",
        "A header, or all of them together, is longer than {limit} bytes: send fewer or "
        "shorter headers (a cookie that grew, a long token).",
    ),
}


def answer_over_long_requests() -> None:
    """Makes every HTTP connection daphne builds answer an over-long request line with 414 and
    over-long headers with 431 (see the module's docstring)."""
    try:
        from daphne.http_protocol import HTTPFactory
    except ImportError:  # served by another ASGI server
        return

    def guarding_long_lines(build_protocol):
        def buildProtocol(self, addr):  # noqa: N802 - Twisted's name
            protocol = build_protocol(self, addr)
            # Twisted wraps its HTTP/1.1 channel in a protocol that may switch to HTTP/2.
            channel = getattr(protocol, "_channel", None)
            if channel is not None and hasattr(channel, "lineLengthExceeded"):
                _guard(channel)
            return protocol

        return buildProtocol

    method_wrap_once(HTTPFactory, "buildProtocol", guarding_long_lines)


def _guard(channel) -> None:
    """Overrides, on this one connection, what HTTPChannel does past its two limits."""
    line_received = channel.lineReceived

    def lineLengthExceeded(self, line: bytes) -> None:  # noqa: N802 - Twisted's name
        # Still on the request line, or already among the headers.
        _refuse(self, 414 if _reading_request_line(self) else 431, self.MAX_LENGTH)

    def lineReceived(self, line: bytes) -> None:  # noqa: N802 - Twisted's name
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            status = 414 if _reading_request_line(self) else 431
            _refuse(self, status, self.totalHeadersSize)
            return
        line_received(line)

    channel.lineLengthExceeded = types.MethodType(lineLengthExceeded, channel)
    channel.lineReceived = types.MethodType(lineReceived, channel)


def _reading_request_line(channel) -> bool:
    # HTTPChannel's own flag (name-mangled): true until a request's first line is read.
    return bool(getattr(channel, "_HTTPChannel__first_line", 0))


def _refuse(channel, status: int, limit: int) -> None:
    from twisted.internet import reactor

    reason, detail = _TOO_LONG[status]
    body = json.dumps({"detail": detail.format(limit=limit), "limit_bytes": limit}).encode()
    channel.transport.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    # Read and drop the rest; no more requests on this connection.
    channel.dataReceived = lambda data: None
    channel.lineReceived = lambda line: None
    channel._networkProducer.unregisterProducer()
    channel.transport.loseWriteConnection()
    reactor.callLater(LINGER_S, channel.transport.loseConnection)
