"""The bot's HTTP client for the Bot API: python-telegram-bot's networking interface
(``BaseRequest``) over an aiohttp client session.

Why not python-telegram-bot's own (httpx): each Bot API call through httpx, httpcore and anyio
costs ~0.9 ms of the event loop's CPU; through aiohttp, whose HTTP parser is compiled, ~0.2 ms
(measured on this machine, 3,000 ``answerCallbackQuery`` calls to a local server). A bot
answering a thousand readers' taps makes ~200 calls a second (the taps' answers, their ticks,
``getUpdates`` and the replies), and every millisecond of them is one a reply to a command
waits for (issue 24: ``bench/bench_replies.py --raters 1000``). aiohttp is already the pages'
server, so nothing new is installed.

The wire: the same POSTs, with the parameters as JSON, which the Bot API takes for every
method without a file (python-telegram-bot's client form-encodes them, which quotes every
byte of a message's text in Python: ~3% of the event loop's time during a round), and as a
multipart form with files; python-telegram-bot's User-Agent and certificate store (certifi,
as httpx). Its rules carry over too:
- at most ``pool_size`` connections; a request that finds them all busy for ``pool_timeout``
  raises ``TimedOut`` saying it was not sent;
- the connect and read timeouts are per step (the read's restarts with every chunk); a write
  timeout aiohttp has no place for: the whole request is bounded by the sum of the three;
- timeouts raise ``TimedOut`` (``AnswerTimedOut`` when the request had gone out whole: the
  delivery settles those as "maybe sent", never sending them twice), every other network
  failure ``NetworkError``; status codes and JSON are python-telegram-bot's to read.

Behind a proxy set in the environment (``HTTPS_PROXY`` …) the bot keeps python-telegram-bot's
own client, which reads those settings.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request

import aiohttp
import certifi
import httpx
from telegram import Bot
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import JSONDict, ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from topicpulse.bot.intake import lighten

POOL_SIZE = 256  # connections at most (python-telegram-bot's own default for the bot)
POOL_FULL = (
    "Pool timeout: every connection in the pool is busy. The request was not sent to Telegram."
)
JSON = {"Content-Type": "application/json"}


class AnswerTimedOut(TimedOut):
    """The request was written out whole and its answer did not come within the read
    timeout: Telegram most likely acted on it."""


def written_unanswered(exc: TimedOut) -> bool:
    """Whether a timed-out request went out whole (``AnswerTimedOut``, or httpx's read timeout
    from python-telegram-bot's own client behind a proxy)."""
    return isinstance(exc, AnswerTimedOut) or isinstance(exc.__cause__, httpx.ReadTimeout)


class AiohttpRequest(BaseRequest):
    """``BaseRequest`` over one ``aiohttp.ClientSession`` (made in ``initialize``: a session
    belongs to the event loop it was made in). Defaults are python-telegram-bot's."""

    def __init__(
        self,
        pool_size: int = POOL_SIZE,
        *,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self.pool_size = pool_size
        self._timeouts = (read_timeout, write_timeout, connect_timeout, pool_timeout)
        self._media_write_timeout = media_write_timeout
        self._slots = asyncio.Semaphore(pool_size)  # (made anew in each loop's initialize)
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._timeouts[0]

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            tls = ssl.create_default_context(cafile=certifi.where())
            self._slots = asyncio.Semaphore(self.pool_size)
            self._session = aiohttp.ClientSession(  # (the pool's bound is ``_slots`` alone)
                connector=aiohttp.TCPConnector(limit=0, ssl=tls),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data else None
        read, write, connect, pool = (
            default if isinstance(given, DefaultValue) else given
            for given, default in zip(
                (read_timeout, write_timeout, connect_timeout, pool_timeout),
                self._timeouts,
                strict=True,
            )
        )
        if files and isinstance(write_timeout, DefaultValue):
            write = self._media_write_timeout
        phases = (connect, write, read)
        timeout = aiohttp.ClientTimeout(
            total=None if None in phases else sum(p for p in phases if p is not None),
            connect=connect,
            sock_connect=connect,
            sock_read=read,
        )
        await self._take_slot(pool)
        try:
            async with session.request(
                method, url, timeout=timeout, **_body(request_data, files)
            ) as response:
                return response.status, await response.read()
        except aiohttp.SocketTimeoutError as exc:  # (armed once the request is written whole)
            raise AnswerTimedOut from exc
        except TimeoutError as exc:  # (aiohttp's other timeouts are TimeoutErrors too)
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        finally:
            self._slots.release()

    async def _take_slot(self, pool_timeout: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # (free: returns at once)
            return
        try:
            await asyncio.wait_for(self._slots.acquire(), pool_timeout)
        except TimeoutError as exc:
            raise TimedOut(POOL_FULL) from exc


def _body(request_data: RequestData | None, files: object) -> dict[str, object]:
    """The request's body: the parameters as JSON (which the Bot API takes for every method
    without a file), or as a multipart form with the files."""
    if request_data is None:
        return {}
    if not files:
        body = json.dumps(request_data.parameters, ensure_ascii=False).encode()
        return {"data": body, "headers": JSON}
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, (filename, content, mimetype) in request_data.multipart_data.items():
        form.add_field(name, content, filename=filename, content_type=mimetype)
    return {"data": form}


class UpdatesRequest(AiohttpRequest):
    """``getUpdates``' request: one connection, and the updates trimmed (``intake``)."""

    def __init__(self) -> None:
        super().__init__(1)

    def parse_json_payload(self, payload: bytes) -> JSONDict:  # type: ignore[override]
        data = super().parse_json_payload(payload)
        if isinstance(data.get("result"), list):
            for update in data["result"]:
                lighten(update)
        return data


def behind_proxy() -> bool:
    return any(scheme in ("https", "all") for scheme in urllib.request.getproxies())


def bot_request() -> BaseRequest:
    """The request object for the bot's calls: an ``AiohttpRequest``, or python-telegram-bot's
    own behind a proxy set in the environment."""
    if behind_proxy():
        return HTTPXRequest(connection_pool_size=POOL_SIZE)
    return AiohttpRequest()


def updates_request() -> BaseRequest:
    """The request object for ``getUpdates``, which holds its one connection while it waits:
    an ``UpdatesRequest``, or python-telegram-bot's own behind a proxy (updates untrimmed)."""
    if behind_proxy():
        return HTTPXRequest(connection_pool_size=1)
    return UpdatesRequest()


async def close_sessions(bot: Bot) -> None:
    """Close the bot's HTTP clients. python-telegram-bot closes them only for a bot whose
    ``initialize`` succeeded; one that failed (Telegram unreachable, a wrong token) has opened
    them already, and aiohttp would complain at exit of sessions left open."""
    for request in getattr(bot, "_request", ()):  # (the bot's two: getUpdates', the others')
        await request.shutdown()


def file_url(api_url: str) -> str:
    """The file endpoint beside a Bot API base URL (".../bot" → ".../file/bot")."""
    head, _, tail = api_url.rstrip("/").rpartition("/")
    return f"{head}/file/{tail}" if head else api_url
