"""The bot's HTTP client for the Bot API: httpx, with a lighter connection pool.

httpcore's pool (1.0) looks at every pooled connection whenever a request starts or ends: for
each idle one it asks the kernel whether the server has closed it (a ``poll`` and a
``getpeername``), and it counts the idle connections once for each idle connection. A bot that
answers taps, sends alerts and replies at once keeps a dozen or more connections open, so each
request made a few dozen system calls on the event loop. Each of them lets go of the GIL, and
while the store's threads are busy (a round storing a page of papers) getting it back takes up
to the switch interval: measured with ``bench/bench_replies.py --raters 1000``, a reply's HTTP
round trip during a round took up to 290 ms on a local socket, the loop found waiting in those
calls.

``LeanPool`` keeps httpcore's rules and connections, and changes when the checks are made:
- every idle connection is checked (its keep-alive expired, or the server closed it) at most
  once a second, instead of on every request;
- the connection about to be reused is always checked first, so a connection the server has
  closed is never handed a request;
- the connections are counted once per pass, not once per idle connection.
"""

from __future__ import annotations

import time
import urllib.request

import httpcore
import httpx
from httpcore import AsyncConnectionInterface
from httpcore._async.connection_pool import AsyncPoolRequest
from telegram.request import HTTPXRequest

Connection = AsyncConnectionInterface
POOL_SIZE = 256  # connections at most (python-telegram-bot's own default for the bot)
SWEEP_EVERY = 1.0  # seconds between checks of every idle connection


class LeanPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool with its bookkeeping made light (see the module)."""

    _swept = float("-inf")  # when every idle connection was last checked

    def _assign_requests_to_connections(self) -> list[Connection]:
        closing: list[Connection] = []
        now = time.monotonic()
        sweep = now - self._swept >= SWEEP_EVERY
        if sweep:
            self._swept = now
        kept: list[Connection] = []
        for connection in self._connections:
            if connection.is_closed():
                continue
            if sweep and connection.has_expired():
                closing.append(connection)
                continue
            kept.append(connection)
        idle = [c for c in kept if c.is_idle()]
        for connection in idle[: max(0, len(idle) - self._max_keepalive_connections)]:
            kept.remove(connection)  # surplus idle connections, the longest in the pool first
            closing.append(connection)
        self._connections[:] = kept

        for pool_request in self._requests:
            if pool_request.is_queued() and not self._assign(pool_request, closing):
                break  # no connection free and none to be made: the rest wait too
        return closing

    def _assign(self, pool_request: AsyncPoolRequest, closing: list[Connection]) -> bool:
        origin = pool_request.request.url.origin
        for connection in list(self._connections):
            if connection.can_handle_request(origin) and connection.is_available():
                if connection.is_idle() and connection.has_expired():
                    self._connections.remove(connection)  # closed by the server meanwhile
                    closing.append(connection)
                    continue
                pool_request.assign_to_connection(connection)
                return True
        if len(self._connections) >= self._max_connections:
            idle = next((c for c in self._connections if c.is_idle()), None)
            if idle is None:
                return False
            self._connections.remove(idle)  # an idle connection elsewhere makes room
            closing.append(idle)
        connection = self.create_connection(origin)
        self._connections.append(connection)
        pool_request.assign_to_connection(connection)
        return True


def bot_request() -> HTTPXRequest:
    """The request object for the bot's calls (not ``getUpdates``, which holds one connection):
    python-telegram-bot's, over a transport whose pool is a ``LeanPool``. Behind a proxy set in
    the environment (``HTTPS_PROXY`` …), python-telegram-bot's own: httpx reads those only for
    the transports it makes itself."""
    if any(scheme in ("https", "all") for scheme in urllib.request.getproxies()):
        return HTTPXRequest(connection_pool_size=POOL_SIZE)
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=POOL_SIZE))
    if type(getattr(transport, "_pool", None)) is httpcore.AsyncConnectionPool:
        transport._pool.__class__ = LeanPool  # the same pool and settings, lighter bookkeeping
    return HTTPXRequest(connection_pool_size=POOL_SIZE, httpx_kwargs={"transport": transport})


def file_url(api_url: str) -> str:
    """The file endpoint beside a Bot API base URL (".../bot" → ".../file/bot")."""
    head, _, tail = api_url.rstrip("/").rpartition("/")
    return f"{head}/file/{tail}" if head else api_url
