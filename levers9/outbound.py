"""Where the server may send a request a workspace user pointed it at.

An owner types an endpoint's address (a vLLM agent under "Runs on", a judge under Environment
→ Judge); the server then POSTs there and shows the answer. So an address is allowed only when
every address its host resolves to is globally routable (Python's `ip_address(...).is_global`,
after unwrapping the IPv6 forms that carry an IPv4 address: mapped, compatible, 6to4, Teredo
and NAT64), and never multicast or a special-purpose anycast range — unless an operator allowed
the host in `LEVERS9_ENDPOINT_ALLOWED_HOSTS` (a comma list of host names or addresses, e.g.
`127.0.0.1,gpu-node-1`).

It is checked when the address is saved, before every call, and again at connect time: the
clients' transport (levers9.outbound_transport) resolves the host, checks every address and
connects to a checked one, so a DNS answer that changes between the check and the connection
(DNS rebinding) cannot slip past. The clients follow no redirects. A refusal never says what a
host resolved to (that would map internal names for whoever types them), nor whether it
resolved at all. A platform-wide key variable (VLLM_API_KEY) is sent only to allowed hosts. The
platform's own serving (an endpoint it started itself for a trained version) is not a typed
address and is not checked here.

Pure Python, no Django.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from urllib.parse import urlparse

ALLOWED_HOSTS_ENV = "LEVERS9_ENDPOINT_ALLOWED_HOSTS"

# Ranges Python still calls global that no endpoint of ours lives in: 192.0.0.0/24 holds
# anycast and NAT addresses (192.0.0.9, .10 are "global" to Python), 192.88.99.0/24 is the
# retired 6to4 relay anycast, and 64:ff9b:1::/48 is local-use NAT64 (RFC 8215).
_REFUSED_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in ("192.0.0.0/24", "192.88.99.0/24", "64:ff9b:1::/48")
)
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class OutboundRefused(Exception):
    """A typed address the server will not call; the message says why, never an address."""


def allowed_hosts(environ: Mapping[str, str] | None = None) -> set[str]:
    raw = (os.environ if environ is None else environ).get(ALLOWED_HOSTS_ENV, "")
    return {host.strip().lower().strip("[]") for host in raw.split(",") if host.strip()}


def url_host(url: str) -> str:
    """The host of `url`, lower case ("" when it names none or cannot be read)."""
    try:
        return (urlparse(url).hostname or "").lower()
    except ValueError:
        return ""


def host_allowed(url: str, environ: Mapping[str, str] | None = None) -> bool:
    """True when an operator allowed this address's host by name."""
    host = url_host(url)
    return bool(host) and host in allowed_hosts(environ)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 addresses an IPv6 address carries (packets to it end up there), or None."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # the Teredo server and the client behind it
    if ip in _NAT64_WELL_KNOWN or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return None


def address_is_public(address: str) -> bool:
    """True when `address` is one the server may call without an operator's say-so."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            # Judged by where it leads: Python 3.11 calls 2002:7f00:1:: (6to4 loopback) global.
            return all(address_is_public(str(inner)) for inner in embedded)
    if ip.is_multicast or any(ip in network for network in _REFUSED_NETWORKS):
        return False
    return ip.is_global


def _resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order (raises OSError)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _refusal(host: str) -> str:
    # One message whether the host did not resolve or resolved inside: telling the two apart
    # would tell a workspace user which internal names exist.
    return (
        f"endpoint_url: '{host}' does not resolve to a public address from the server: check "
        f"the address; the server calls other hosts only when an operator allows them in "
        f"{ALLOWED_HOSTS_ENV} (for example {ALLOWED_HOSTS_ENV}={host})."
    )


def connect_addresses(
    host: str, port: int, environ: Mapping[str, str] | None = None
) -> list[str] | None:
    """The checked addresses to connect to for `host`, or None when an operator allowed the
    host by name (connect to it as named). Raises OutboundRefused."""
    host = host.lower().strip("[]")
    if not host:
        raise OutboundRefused("endpoint_url names no host.")
    if host in allowed_hosts(environ):
        return None
    try:
        addresses = _resolve(host, port)
    except (OSError, UnicodeError):
        raise OutboundRefused(_refusal(host)) from None
    if not addresses or not all(address_is_public(address) for address in addresses):
        raise OutboundRefused(_refusal(host))
    return addresses


def outbound_problem(url: str, environ: Mapping[str, str] | None = None) -> str:
    """Why the server will not call `url` ("" when it will), naming the setting that allows it."""
    try:
        parsed = urlparse(url)
        host = (parsed.hostname or "").lower()
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return f"endpoint_url: '{url[:200]}' is not an address the server can read."
    if not host:
        return f"endpoint_url: '{url[:200]}' names no host."
    try:
        connect_addresses(host, port, environ)
    except OutboundRefused as refusal:
        return str(refusal)
    return ""
