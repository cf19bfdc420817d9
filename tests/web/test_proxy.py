"""The pages' rate limit, over a real server on 127.0.0.1: cached pages are served past it, a
configured trusted proxy's ``X-Forwarded-For`` names the visitor (and nothing else does), and
an IPv6 visitor is keyed by its /64."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot_harness import bot_session
from topicpulse.store import Store
from topicpulse.topics.catalogue import sync_catalogue
from topicpulse.web import throttle
from topicpulse.web.server import RATE, WebContext, build_web_app

pytestmark = pytest.mark.timeout(120)

SLUG = "rl-for-language-models"
LIMIT = RATE[0]
UNCACHED = "/api/q"  # no query: a 400, never cached, so every request counts


async def serve(store: Store, **extra: object) -> TestClient:
    """A server whose monotonic clock stands still: no allowance comes back during a test."""
    context = WebContext(store, poll_seconds=1800, monotonic=lambda: 0.0, **extra)  # type: ignore[arg-type]
    client = TestClient(TestServer(build_web_app(context), host="127.0.0.1"))
    await client.start_server()
    return client


async def status(client: TestClient, path: str, forwarded: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    async with client.get(path, headers=headers) as response:
        await response.read()
        return response.status


async def use_up(client: TestClient, forwarded: str | None = None, count: int = LIMIT) -> None:
    """``count`` requests the cache cannot answer, each admitted (and counted)."""
    for _ in range(count):
        assert await status(client, UNCACHED, forwarded) == 400


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "proxy.db") as opened:
        await sync_catalogue(opened)
        yield opened


async def test_cached_pages_are_served_to_a_client_over_its_limit(store: Store) -> None:
    client = await serve(store)
    try:
        assert await status(client, f"/api/topics/{SLUG}") == 200  # now cached; one allowance
        assert await status(client, f"/topics/{SLUG}") == 200
        await use_up(client, count=LIMIT - 2)
        assert await status(client, UNCACHED) == 429
        assert await status(client, f"/topics/{SLUG}?page=2") == 429  # not cached: limited
        for _ in range(5):
            assert await status(client, f"/api/topics/{SLUG}") == 200
            assert await status(client, f"/topics/{SLUG}") == 200
    finally:
        await client.close()


async def test_behind_a_trusted_proxy_each_forwarded_visitor_has_its_own_allowance(
    store: Store,
) -> None:
    proxies = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("10.0.0.0/8"))
    client = await serve(store, trusted_proxies=proxies)
    try:
        await use_up(client, "203.0.113.5")
        assert await status(client, UNCACHED, "203.0.113.5") == 429
        # What the visitor wrote sits left of what the proxies appended: it changes nothing.
        assert await status(client, UNCACHED, "198.51.100.99, 203.0.113.5") == 429
        assert await status(client, UNCACHED, "203.0.113.5, 10.1.2.3") == 429  # two proxies
        # Another visitor behind the same proxy has a whole allowance of its own.
        await use_up(client, "198.51.100.7")
        assert await status(client, UNCACHED, "198.51.100.7") == 429
        # No header from a trusted proxy: the proxy itself is the visitor.
        await use_up(client)
        assert await status(client, UNCACHED) == 429
    finally:
        await client.close()


async def test_without_trusted_proxies_x_forwarded_for_is_ignored(store: Store) -> None:
    client = await serve(store)
    try:
        await use_up(client, "203.0.113.5")
        assert await status(client, UNCACHED, "198.51.100.7") == 429  # the same connection
        assert await status(client, UNCACHED) == 429
    finally:
        await client.close()


async def test_forwarded_ipv6_visitors_are_keyed_by_their_64(store: Store) -> None:
    client = await serve(store, trusted_proxies=(ipaddress.ip_network("127.0.0.1"),))
    try:
        await use_up(client, "2001:db8:1:2::1")
        assert await status(client, UNCACHED, "2001:db8:1:2:ffff:ffff:ffff:ffff") == 429
        assert await status(client, UNCACHED, "2001:db8:1:3::1") == 400  # another /64
    finally:
        await client.close()


def test_client_key_ipv4_whole_ipv6_by_64() -> None:
    key = throttle.client_key
    assert key("192.0.2.1") == "192.0.2.1" != key("192.0.2.2")
    assert key("2001:db8:1:2::1") == key("2001:db8:1:2:abcd:ef01:2345:6789") == "2001:db8:1:2::/64"
    assert key("2001:db8:1:2::1") != key("2001:db8:1:3::1")
    assert key("::ffff:192.0.2.1") == "192.0.2.1"  # IPv4 seen through a dual-stack socket
    assert key("fe80::1%eth0") == "fe80::/64"
    assert key(None) == key("not an address") == "?"


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("127.0.0.1", [], "127.0.0.1"),  # a trusted proxy without the header
        ("127.0.0.1", ["203.0.113.5"], "203.0.113.5"),
        ("127.0.0.1", ["198.51.100.99, 203.0.113.5"], "203.0.113.5"),  # right-most untrusted
        ("127.0.0.1", ["203.0.113.5, 10.0.0.2"], "203.0.113.5"),
        ("127.0.0.1", ["203.0.113.5", "10.0.0.2"], "203.0.113.5"),  # two header lines
        ("127.0.0.1", ["10.0.0.3, 10.0.0.2"], "10.0.0.3"),  # all proxies: the farthest
        ("127.0.0.1", ["203.0.113.5, junk, 10.0.0.2"], "10.0.0.2"),  # the last readable hop
        ("127.0.0.1", ["203.0.113.5:4711"], "203.0.113.5"),
        ("127.0.0.1", ["[2001:db8::5]:4711"], "2001:db8::5"),
        ("192.0.2.9", ["203.0.113.5"], "192.0.2.9"),  # not a trusted proxy: header ignored
    ],
)
def test_client_address_from_a_trusted_proxy(peer: str, forwarded: list[str], client: str) -> None:
    trusted = (ipaddress.ip_network("127.0.0.1"), ipaddress.ip_network("10.0.0.0/8"))
    assert throttle.client_address(peer, forwarded, trusted) == client
    assert throttle.client_address(peer, forwarded, ()) == peer


async def test_the_running_bot_passes_its_trusted_proxies_to_the_pages(tmp_path: Path) -> None:
    """The setting reaches the pages the bot serves (here beside its webhook)."""
    async with bot_session(
        tmp_path, transport="webhook", TOPICPULSE_TRUSTED_PROXIES="127.0.0.1"
    ) as bot:
        base = f"http://127.0.0.1:{bot.settings.web_port}"
        async with httpx.AsyncClient(base_url=base) as http:

            async def page(visitor: str) -> int:
                answer = await http.get(UNCACHED, headers={"X-Forwarded-For": visitor})
                return answer.status_code

            for _ in range(LIMIT):
                assert await page("203.0.113.1") == 400
            assert await page("203.0.113.1") == 429
            assert await page("203.0.113.2") == 400
