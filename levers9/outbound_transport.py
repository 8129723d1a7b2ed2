"""The HTTP transport of the model clients that call a typed address: resolve, check, connect
to the checked address (levers9.outbound says which addresses pass).

The `openai` and `anthropic` clients sit on httpx (packaged as httpx2). Checking an address
before a call is not enough: the client resolves the host again when it connects, and a DNS
answer that changes in between (a rebinding name with a short TTL) would lead it inside. So
this transport resolves the host itself, refuses the request unless every address is a public
one, and sends it to a checked address: the URL names that address, while the Host header and
TLS (server name and certificate check) keep the host name. Hosts an operator allowed by name
are connected to as named. It reads no proxy settings from the environment: a proxy would
resolve the name again, out of the check's sight.

Pure Python, no Django; imported only where a client is made.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx2

from levers9.outbound import OutboundRefused, connect_addresses


class OutboundConnectRefused(httpx2.ConnectError):
    """The transport refused to connect: the host's address is not a public one."""


class PinnedTransport(httpx2.BaseTransport):
    """Connects only to checked addresses of the request's host (see the module's doc)."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        inner: httpx2.BaseTransport | None = None,
    ) -> None:
        self._environ = environ
        self._inner = inner if inner is not None else httpx2.HTTPTransport(trust_env=False)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.raw_host.decode("ascii")
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        try:
            addresses = connect_addresses(host, port, self._environ)
        except OutboundRefused as refusal:
            raise OutboundConnectRefused(str(refusal), request=request) from None
        if addresses is None:
            return self._inner.handle_request(request)
        named_url = request.url
        last_error: httpx2.ConnectError | None = None
        for address in addresses:
            # The Host header was set from the name when the request was built and stays.
            request.url = named_url.copy_with(host=address)
            request.extensions = {**request.extensions, "sni_hostname": host}
            try:
                return self._inner.handle_request(request)
            except httpx2.ConnectError as error:
                last_error = error  # nothing was sent yet: the next checked address
            finally:
                request.url = named_url
        if last_error is None:  # connect_addresses never returns an empty list
            raise OutboundConnectRefused("endpoint_url: no address to connect to.", request=request)
        raise last_error

    def close(self) -> None:
        self._inner.close()
