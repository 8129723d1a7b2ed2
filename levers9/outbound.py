"""Where the server may send a request a workspace user pointed it at.

An owner types an endpoint's address (a vLLM agent under "Runs on", a judge under Environment
→ Judge); the server then POSTs there and shows the answer. So an address is allowed only when
every address its host resolves to is a public one — loopback, private, link-local (the cloud
metadata service among them), reserved, multicast and unspecified addresses are refused — unless
an operator allowed the host in `LEVERS9_ENDPOINT_ALLOWED_HOSTS` (a comma list of host names or
addresses, e.g. `127.0.0.1,gpu-node-1`). It is checked when the address is saved and again before
every call (DNS can change in between), and the clients follow no redirects. A platform-wide key
variable (VLLM_API_KEY) is sent only to allowed hosts. The platform's own serving (an endpoint it
started itself for a trained version) is not a typed address and is not checked here.

Pure Python, no Django.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from urllib.parse import urlparse

ALLOWED_HOSTS_ENV = "LEVERS9_ENDPOINT_ALLOWED_HOSTS"


def allowed_hosts(environ: Mapping[str, str] | None = None) -> set[str]:
    raw = (os.environ if environ is None else environ).get(ALLOWED_HOSTS_ENV, "")
    return {host.strip().lower().strip("[]") for host in raw.split(",") if host.strip()}


def host_allowed(url: str, environ: Mapping[str, str] | None = None) -> bool:
    """True when an operator allowed this address's host by name."""
    host = (urlparse(url).hostname or "").lower()
    return bool(host) and host in allowed_hosts(environ)


def _blocked(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def outbound_problem(url: str, environ: Mapping[str, str] | None = None) -> str:
    """Why the server will not call `url` ("" when it will), naming the setting that allows it."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    if not host:
        return f"'{url}' names no host."
    if host in allowed_hosts(environ):
        return ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        return f"'{host}' does not resolve from the dashboard; check the address."
    for address in sorted(resolved):
        if _blocked(address):
            return (
                f"'{host}' is a loopback, private or link-local address ({address}); the server "
                f"calls such hosts only when an operator allows them in {ALLOWED_HOSTS_ENV} "
                f"(for example {ALLOWED_HOSTS_ENV}={host})."
            )
    return ""
