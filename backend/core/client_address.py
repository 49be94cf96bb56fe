"""Which address a request comes from, for throttles and the audit log.

``X-Forwarded-For`` is written by whoever sends the request, so it is believed only when the
peer (``REMOTE_ADDR``) is one of the configured trusted proxies (``SLUICE_TRUSTED_PROXIES``:
addresses or networks, none by default). Then the list is read from the right, past every
trusted proxy, and the first other address is the client: a client cannot choose its key by
prepending entries, since only the entries the proxies appended are read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def parse_networks(spec: Iterable[str]) -> tuple[Network, ...]:
    """``("10.0.0.0/8", "127.0.0.1")`` -> networks (pass a tuple: cached); a bad entry raises
    ValueError naming it."""
    networks = []
    for item in spec:
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"SLUICE_TRUSTED_PROXIES: {item!r} is not an IP address or network"
            ) from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[::1]:1234"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "1.2.3.4:1234"
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address, proxies: tuple[Network, ...]) -> bool:
    return any(address.version == n.version and address in n for n in proxies)


def client_address(
    remote_addr: str | None, forwarded_for: str | None, proxies: tuple[Network, ...]
) -> str | None:
    """The client's address as text (IPv4-mapped addresses as IPv4), or None if unknown."""
    peer = _address(remote_addr or "")
    if peer is None:
        return remote_addr or None
    if not proxies or not forwarded_for or not _trusted(peer, proxies):
        return str(peer)
    hops = [h for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:  # garbage a proxy passed on: stop at the last good address
            break
        if not _trusted(address, proxies):
            return str(address)
        peer = address
    return str(peer)
