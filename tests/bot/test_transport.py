"""The bot's HTTP client (bot/transport.py): its lighter connection pool keeps httpcore's rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpcore
import httpx
import pytest

from topicpulse.bot import transport
from topicpulse.bot.transport import LeanPool, bot_request, file_url


class Server:
    """A plain HTTP/1.1 server on 127.0.0.1 that answers every request with "ok", keeps the
    connection alive, and can close the idle connections itself (as servers do)."""

    def __init__(self) -> None:
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await self.hold.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def close_idle(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def stop(self) -> None:
        self.close_idle()
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    served = Server()
    await served.start()
    yield served
    await served.stop()


def lean_client(**limits: float | int | None) -> httpx.AsyncClient:
    client_transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(**limits))  # type: ignore[arg-type]
    client_transport._pool.__class__ = LeanPool
    return httpx.AsyncClient(transport=client_transport)


def pool_of(client: httpx.AsyncClient) -> httpcore.AsyncConnectionPool:
    return client._transport._pool  # type: ignore[attr-defined,no-any-return]


async def test_the_bots_requests_go_through_the_lean_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    request = bot_request()
    pool = request._client._transport._pool  # type: ignore[attr-defined]
    assert type(pool) is LeanPool
    assert pool._max_connections == transport.POOL_SIZE
    assert file_url("http://127.0.0.1:1/bot") == "http://127.0.0.1:1/file/bot"


async def test_behind_a_proxy_set_in_the_environment_the_stock_client_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    client = bot_request()._client  # type: ignore[attr-defined]
    transports = [client._transport, *client._mounts.values()]
    pools = [t._pool for t in transports if t is not None]
    assert not any(isinstance(pool, LeanPool) for pool in pools)
    assert any(isinstance(pool, httpcore.AsyncHTTPProxy) for pool in pools)  # the proxy is used


async def test_concurrent_requests_share_connections_up_to_the_limit(server: Server) -> None:
    async with lean_client(max_connections=4) as client:
        server.hold.clear()  # every request waits at the server: the pool fills up
        requests = [asyncio.create_task(client.get(server.url)) for _ in range(10)]
        for _ in range(100):
            await asyncio.sleep(0.01)
            if server.connections == 4:
                break
        assert len(pool_of(client).connections) == 4  # the other six wait in the pool
        server.hold.set()
        answers = await asyncio.gather(*requests)
        assert [a.text for a in answers] == ["ok"] * 10
        assert server.connections == 4  # and were sent over the same four connections
        for _ in range(5):  # one after another: one idle connection reused each time
            assert (await client.get(server.url)).text == "ok"
        assert server.connections == 4


async def test_a_connection_the_server_closed_is_not_reused(server: Server) -> None:
    async with lean_client(max_connections=8) as client:
        assert (await client.get(server.url)).text == "ok"
        server.close_idle()  # the server drops the kept-alive connection
        await asyncio.sleep(0.05)
        # (checked just before reuse: without it this request would fail on a dead socket)
        assert (await client.get(server.url)).text == "ok"
        assert server.connections == 2


async def test_expired_keep_alives_are_closed_by_the_next_sweep(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Server()  # a request to another server touches no connection to the first but here
    await other.start()
    monkeypatch.setattr(transport, "SWEEP_EVERY", 0.0)
    try:
        async with lean_client(max_connections=8, keepalive_expiry=0.05) as client:
            await asyncio.gather(*(client.get(server.url) for _ in range(3)))
            assert len(pool_of(client).connections) == 3
            await asyncio.sleep(0.1)  # all three past their keep-alive
            assert (await client.get(other.url)).text == "ok"
            assert len(pool_of(client).connections) == 1  # only the new one is left
    finally:
        await other.stop()


async def test_surplus_idle_connections_are_closed(server: Server) -> None:
    async with lean_client(max_connections=8, max_keepalive_connections=2) as client:
        await asyncio.gather(*(client.get(server.url) for _ in range(5)))
        await client.get(server.url)  # a pass after they all went idle
        assert len(pool_of(client).connections) <= 2
