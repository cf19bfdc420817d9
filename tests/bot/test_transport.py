"""The bot's HTTP client (bot/transport.py): python-telegram-bot's networking interface over
aiohttp, with python-telegram-bot's wire, limits and errors, against local servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import InputFile, Message, Update
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData
from telegram.request._requestparameter import RequestParameter

from topicpulse.bot.transport import (
    POOL_FULL,
    POOL_SIZE,
    AiohttpRequest,
    UpdatesRequest,
    bot_request,
    file_url,
    updates_request,
)

OK = b'{"ok":true,"result":true}'


class Server:
    """A plain HTTP/1.1 server on 127.0.0.1 that answers every request with ``OK``, keeps the
    connection alive, counts connections, and can hold its answers or close the idle
    connections itself (as servers do)."""

    def __init__(self) -> None:
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/bot1:x/getMe"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                await self.hold.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK))
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
        self.hold.set()
        self.close_idle()
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    served = Server()
    await served.start()
    yield served
    await served.stop()


@pytest.fixture
async def client() -> AsyncIterator[AiohttpRequest]:
    request = AiohttpRequest(4, pool_timeout=0.2)
    await request.initialize()
    yield request
    await request.shutdown()


def params(**values: Any) -> RequestData:
    return RequestData([RequestParameter.from_input(k, v) for k, v in values.items()])


async def wait_until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_the_bots_requests_go_through_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    no_proxy(monkeypatch)
    calls, updates = bot_request(), updates_request()
    assert isinstance(calls, AiohttpRequest) and calls.pool_size == POOL_SIZE
    assert isinstance(updates, UpdatesRequest) and updates.pool_size == 1
    assert calls.read_timeout == 5.0  # python-telegram-bot's defaults
    assert file_url("http://127.0.0.1:1/bot") == "http://127.0.0.1:1/file/bot"


async def test_behind_a_proxy_set_in_the_environment_the_stock_client_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    request = bot_request()
    assert isinstance(request, HTTPXRequest)
    mounts = request._client._mounts  # type: ignore[attr-defined]
    assert any("Proxy" in type(t._pool).__name__ for t in mounts.values() if t is not None)


async def test_parameters_go_as_json_and_files_as_a_multipart_form() -> None:
    seen: list[tuple[str, dict[str, Any], dict[str, str]]] = []

    async def handle(request: web.Request) -> web.Response:
        fields: dict[str, Any] = {}
        if request.content_type.startswith("multipart/"):
            async for part in await request.multipart():
                fields[part.name or ""] = (part.filename, await part.read())  # type: ignore[union-attr]
        else:
            assert request.content_type == "application/json"
            fields = await request.json()
        seen.append((request.match_info["method"], fields, dict(request.headers)))
        return web.Response(body=OK, content_type="application/json")

    app = web.Application()
    app.router.add_post("/bot1:x/{method}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    request = AiohttpRequest()
    await request.initialize()
    try:
        base = f"http://127.0.0.1:{port}/bot1:x"
        markup = {"inline_keyboard": [[{"text": "👍", "callback_data": "r:1:+"}]]}
        text = "<b>Q&A</b> = 100% ✓"
        assert await request.post(
            f"{base}/sendMessage", params(chat_id=5, text=text, reply_markup=markup)
        )
        photo = InputFile(b"\x89PNG chart", filename="chart.png")
        assert await request.post(f"{base}/sendPhoto", params(chat_id=5, photo=photo))
    finally:
        await request.shutdown()
        await runner.cleanup()
    (method, fields, headers), (method2, fields2, _) = seen
    assert method == "sendMessage"
    assert fields == {"chat_id": 5, "text": text, "reply_markup": markup}  # as JSON
    assert headers["User-Agent"] == BaseRequest.USER_AGENT
    assert method2 == "sendPhoto" and fields2["chat_id"] == (None, b"5")
    assert fields2[photo.attach_name or "photo"] == ("chart.png", b"\x89PNG chart")


async def test_requests_share_connections_up_to_the_pool_size(
    server: Server, client: AiohttpRequest
) -> None:
    server.hold.clear()  # every request waits at the server: the pool fills up
    requests = [asyncio.create_task(client.post(server.url)) for _ in range(6)]
    await wait_until(lambda: server.connections == 4)
    server.hold.set()  # (the other two waited for a connection: within the pool timeout)
    assert await asyncio.gather(*requests) == [True] * 6
    for _ in range(5):  # one after another: an idle connection is reused each time
        assert await client.post(server.url) is True
    assert server.connections == 4


async def test_a_full_pool_past_its_timeout_is_timed_out_and_not_sent(
    server: Server, client: AiohttpRequest
) -> None:
    server.hold.clear()
    busy = [asyncio.create_task(client.post(server.url)) for _ in range(4)]
    await wait_until(lambda: server.connections == 4)
    with pytest.raises(TimedOut, match="not sent"):
        await client.post(server.url)
    assert POOL_FULL.startswith("Pool timeout")
    server.hold.set()
    assert await asyncio.gather(*busy) == [True] * 4


async def test_a_connection_the_server_closed_is_not_reused(
    server: Server, client: AiohttpRequest
) -> None:
    assert await client.post(server.url) is True
    server.close_idle()  # the server drops the kept-alive connection
    await asyncio.sleep(0.05)
    assert await client.post(server.url) is True
    assert server.connections == 2


async def test_a_server_that_does_not_answer_times_out(server: Server) -> None:
    request = AiohttpRequest(read_timeout=0.1)
    await request.initialize()
    try:
        server.hold.clear()
        with pytest.raises(TimedOut):
            await request.post(server.url)
        server.hold.set()
        assert await request.post(server.url) is True  # and the client goes on
    finally:
        await request.shutdown()


async def test_a_refused_connection_is_a_network_error(client: AiohttpRequest) -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # nothing listens there now
    with pytest.raises(NetworkError, match="aiohttp"):
        await client.post(f"http://127.0.0.1:{port}/bot1:x/getMe")


async def test_an_uninitialised_or_shut_client_says_so() -> None:
    request = AiohttpRequest()
    with pytest.raises(NetworkError, match="not initialized"):
        await request.post("http://127.0.0.1:1/bot1:x/getMe")
    await request.initialize()
    await request.shutdown()
    await request.shutdown()  # twice: nothing to do
    with pytest.raises(NetworkError, match="not initialized"):
        await request.post("http://127.0.0.1:1/bot1:x/getMe")


async def test_requests_cancelled_at_any_moment_leave_no_slot_taken(server: Server) -> None:
    """Cancelled while waiting for a slot, while connecting, while the server holds the
    answer: every slot comes back (a lost one would stop ``getUpdates``, whose pool is 1)."""
    request = AiohttpRequest(1, pool_timeout=5.0)
    await request.initialize()
    try:
        for delay in (0.0, 0.001, 0.005, 0.02, 0.05):
            server.hold.clear()
            calls = [asyncio.create_task(request.post(server.url)) for _ in range(3)]
            await asyncio.sleep(delay)
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            server.hold.set()
            assert await asyncio.wait_for(request.post(server.url), 5) is True
        assert not request._slots.locked()
    finally:
        await request.shutdown()


def test_updates_arrive_without_the_entities_of_a_tapped_message() -> None:
    """``getUpdates``' answers are trimmed before python-telegram-bot builds objects: the
    entities of the message under a tapped button go (no handler reads them), a command's
    entities (which ``CommandHandler`` needs) and the tapped message's text and keyboard stay."""
    user = {"id": 7, "is_bot": False, "first_name": "Eve"}
    chat = {"id": 7, "type": "private", "first_name": "Eve"}
    bold = [{"type": "bold", "offset": 0, "length": 5}]
    keyboard = {"inline_keyboard": [[{"text": "👍", "callback_data": "r:1:+"}]]}
    tapped = {"message_id": 3, "date": 1, "chat": chat, "text": "Title and more"}
    tapped |= {"entities": bold, "reply_markup": keyboard}
    command = {"message_id": 4, "date": 1, "chat": chat, "from": user, "text": "/list"}
    command["entities"] = [{"type": "bot_command", "offset": 0, "length": 5}]
    query = {"id": "q", "from": user, "chat_instance": "c", "data": "r:1:+", "message": tapped}
    payload = {"ok": True, "result": [{"update_id": 1, "callback_query": query}]}
    payload["result"].append({"update_id": 2, "message": command})
    data = UpdatesRequest().parse_json_payload(json.dumps(payload).encode())
    first, second = (Update.de_json(u, None) for u in data["result"])  # type: ignore[arg-type]
    assert first.callback_query is not None
    message = first.callback_query.message
    assert isinstance(message, Message) and message.entities == ()
    assert message.text == "Title and more" and message.reply_markup is not None
    assert second.message is not None and second.message.entities[0].type == "bot_command"
    # every other method's answer is left as it came
    other = {"ok": True, "result": {"message_id": 5, "entities": bold}}
    assert AiohttpRequest().parse_json_payload(json.dumps(other).encode()) == other
    assert UpdatesRequest().parse_json_payload(json.dumps(other).encode()) == other
