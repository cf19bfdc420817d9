"""Per-key sliding-window limits kept in memory: a user's commands in chat, a client's page
requests on the web — and who a web client is (``client_address``, ``client_key``)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
Network = IPv4Network | IPv6Network

MEMORY = 10_000  # keys remembered before the idle ones are forgotten
IPV6_PREFIX = 64  # one IPv6 visitor: a /64 is what a home or a host is usually given
UNKNOWN = "?"  # the key of a peer without an IP address (one shared allowance)


def admit(
    stamps: dict[K, list[float]],
    key: K,
    now: float,
    limit: int,
    period: float,
    memory: int = MEMORY,
) -> bool:
    """Whether ``key`` may act at ``now``: fewer than ``limit`` admitted in the last ``period``
    seconds. ``stamps`` (the admitted times per key) is updated in place."""
    recent = [t for t in stamps.get(key, []) if now - t < period]
    allowed = len(recent) < limit
    if allowed:
        recent.append(now)
    stamps[key] = recent
    if len(stamps) > memory:
        for idle in [k for k, ts in stamps.items() if not ts or now - ts[-1] >= period]:
            del stamps[idle]
    return allowed


def _address(text: str) -> IPv4Address | IPv6Address | None:
    """An address as a socket or a proxy writes it (``a.b.c.d``, ``a.b.c.d:port``, ``v6``,
    ``[v6]:port``); an IPv4-mapped IPv6 address as its IPv4 one. None: not an address."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        found = ip_address(text)
    except ValueError:
        return None
    if isinstance(found, IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _trusted(address: IPv4Address | IPv6Address, trusted: Sequence[Network]) -> bool:
    return any(address in network for network in trusted)  # other IP version: never in it


def client_address(
    peer: str | None, forwarded_for: Iterable[str], trusted: Sequence[Network]
) -> str | None:
    """The visitor's address. ``peer`` (the connection's) unless it is a ``trusted`` proxy;
    then the right-most ``X-Forwarded-For`` entry (``forwarded_for``: the header's lines, in
    order) that is not a trusted proxy itself, because a visitor can write anything to the
    left of what the proxies append. Every entry trusted: the left-most (the farthest hop);
    an unreadable entry stops the walk at the last readable hop."""
    hop = _address(peer) if peer else None
    if hop is None or not _trusted(hop, trusted):
        return str(hop) if hop is not None else peer
    entries = [entry for line in forwarded_for for entry in line.split(",")]
    for entry in reversed(entries):
        found = _address(entry)
        if found is None:
            break
        hop = found
        if not _trusted(hop, trusted):
            break
    return str(hop)


def client_key(address: str | None) -> str:
    """The rate limit's key of a visitor's address: an IPv4 address whole, an IPv6 one by its
    /64 (else every address of a network would be a new visitor)."""
    found = _address(address) if address else None
    if found is None:
        return UNKNOWN
    if isinstance(found, IPv6Address):
        return str(IPv6Network((int(found), IPV6_PREFIX), strict=False))
    return str(found)
