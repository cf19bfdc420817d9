"""The web server: aiohttp routes that read ``pages`` and render Jinja2 templates (every value
autoescaped), their JSON twins, ``/healthz``, and in webhook mode Telegram's updates.

Pages are cached for the poll interval (the data changes only when a round stores papers) and
served from the cache to anyone; each visitor may ask for ``RATE`` other pages a minute — a
visitor being its address (an IPv6 one by its /64), or behind a trusted proxy the address the
proxy forwards (``throttle.client_address``). A bad query or page number is a 400 page
saying what is wrong, an unknown topic or paper a 404 — never a 500.
"""

from __future__ import annotations

import hmac
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jinja2
from aiohttp import web

from topicpulse.delivery.chats import UserError, check_argument, clean_text, share_query
from topicpulse.models import parse_iso, utcnow
from topicpulse.sources import arxiv
from topicpulse.store import Store
from topicpulse.topics.catalogue import find_catalogue_topic
from topicpulse.web import deeplinks, pages, throttle

log = logging.getLogger(__name__)

RATE = (60, 60.0)  # uncached pages per visitor per 60 seconds
CACHED = 500  # pages kept
MAX_QUERY_STRING = 2_000  # characters of a query string read at all
WEBHOOK_PATH = "/telegram"  # under TOPICPULSE_WEBHOOK_URL
UNLIMITED = ("/healthz", "/healthz/fresh", WEBHOOK_PATH)  # never rate limited
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("topicpulse.web", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


class NotAccepting(Exception):
    """Raised by ``Webhook.receive`` while the bot cannot take updates: answered 503, so that
    Telegram keeps the update and sends it again."""


@dataclass(frozen=True)
class Webhook:
    """Where Telegram's updates go in webhook mode: ``receive`` takes an update's JSON once the
    request carried ``secret`` (no Telegram objects here: the bot supplies ``receive``)."""

    secret: str
    receive: Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class WebContext:
    """What the pages need: the store, the clock, the bot's username (for deep links), the
    delivery's state when the bot runs in this process, and the proxies whose
    ``X-Forwarded-For`` is believed (none: the connection's address is the visitor)."""

    store: Store
    poll_seconds: float  # the pages are cached this long
    fresh_seconds: float | None = None  # /healthz/fresh: the intake's age limit (3× poll_seconds)
    bot_username: str | None = None
    clock: Callable[[], datetime] = utcnow
    delivery_state: Callable[[], str] = lambda: "not running in this process"
    monotonic: Callable[[], float] = time.monotonic
    webhook: Webhook | None = None
    trusted_proxies: Sequence[throttle.Network] = ()
    # path → (expires, body, content type): a response object is sent once, its body any time
    _cache: OrderedDict[str, tuple[float, bytes, str]] = field(default_factory=OrderedDict)
    _hits: dict[str, list[float]] = field(default_factory=dict)

    def allow(self, client: str) -> bool:
        limit, period = RATE
        return throttle.admit(self._hits, client, self.monotonic(), limit, period)

    def client(self, request: web.Request) -> str:
        """The rate limit's key of the visitor who sent ``request``."""
        forwarded = request.headers.getall("X-Forwarded-For", [])
        address = throttle.client_address(request.remote, forwarded, self.trusted_proxies)
        return throttle.client_key(address)

    def follow_link(self, payload: str) -> str | None:
        """The Telegram deep link that starts the bot with ``payload`` (None: no bot known)."""
        if not self.bot_username:
            return None
        return deeplinks.link(self.bot_username, payload)


_CONTEXT = web.AppKey("topicpulse", WebContext)


def _html(template: str, status: int = 200, **values: Any) -> web.Response:
    body = _templates.get_template(template).render(**values)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def _problem(status: int, message: str) -> web.Response:
    return _html("problem.html", status=status, status_code=status, message=message)


def _wants_json(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def _fail(request: web.Request, status: int, message: str) -> web.Response:
    if _wants_json(request):
        return web.json_response({"error": message}, status=status)
    return _problem(status, message)


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Cache, then rate limit, and bad input → 400 (never a 500 for what a client sent)."""
    tp = request.app[_CONTEXT]
    if request.path in UNLIMITED:  # the platform's, monitoring's and Telegram's
        return await handler(request)
    if len(request.query_string) > MAX_QUERY_STRING:
        return _fail(
            request, 400, f"That address is too long (over {MAX_QUERY_STRING} characters)."
        )
    key = request.path_qs
    cached = tp._cache.get(key)
    now = tp.monotonic()
    if cached and cached[0] > now:  # costs nothing: served to anyone, limit or not
        return web.Response(body=cached[1], content_type=cached[2], charset="utf-8")
    if not tp.allow(tp.client(request)):
        return _fail(request, 429, "Too many requests — wait a minute.")
    try:
        response = await handler(request)
    except (pages.PageError, UserError) as exc:
        return _fail(request, 400, str(exc))
    except web.HTTPException:
        raise
    if isinstance(response, web.Response) and response.status == 200 and response.body:
        body = response.body
        assert isinstance(body, bytes)
        tp._cache[key] = (now + tp.poll_seconds, body, response.content_type)
        tp._cache.move_to_end(key)
        while len(tp._cache) > CACHED:
            tp._cache.popitem(last=False)
    return response


def _text(request: web.Request, name: str) -> str:
    """A typed parameter, cleaned and limited as in chat ("" when absent)."""
    text = clean_text(request.query.get(name, ""))
    return check_argument(text, name) if text else ""


def _page_number(request: web.Request) -> int:
    raw = request.query.get("page", "1")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 5:
        raise pages.PageError("The page must be a number, e.g. ?page=2.")
    return int(raw)


# ---------------------------------------------------------------------------------- pages
async def catalogue(request: web.Request) -> web.Response:
    tp = request.app[_CONTEXT]
    rows = await pages.catalogue(tp.store, tp.clock())
    if _wants_json(request):
        return web.json_response([r.to_json() for r in rows])
    return _html("catalogue.html", rows=rows)


async def topic(request: web.Request) -> web.Response:
    tp = request.app[_CONTEXT]
    found = await find_catalogue_topic(tp.store, request.match_info["slug"])
    if found is None or found.slug is None:
        return _fail(request, 404, "No topic has that address. The catalogue is at /.")
    page = await pages.topic_page(
        tp.store,
        tp.clock(),
        topic=found,
        page=_page_number(request),
        question=_text(request, "question"),
    )
    if _wants_json(request):
        return web.json_response(page.to_json())
    follow = tp.follow_link(deeplinks.topic_payload(found.slug))
    return _html("topic.html", page=page, follow=follow)


async def query_page(request: web.Request) -> web.Response:
    tp = request.app[_CONTEXT]
    text = _text(request, "query")
    if not text:
        raise pages.PageError('Give a query, e.g. /q?query="reward model" AND grpo')
    page = await pages.topic_page(tp.store, tp.clock(), query=text, page=_page_number(request))
    if _wants_json(request):
        return web.json_response(page.to_json())
    # The link carries a code this server issued for the query; the bot shows the query and
    # asks for a tap before following it.
    follow = None
    if tp.bot_username:
        follow = tp.follow_link(deeplinks.query_payload(await share_query(tp.store, text)))
    return _html("topic.html", page=page, follow=follow)


async def paper(request: web.Request) -> web.Response:
    tp = request.app[_CONTEXT]
    arxiv_id = arxiv.typed_id(request.match_info["arxiv_id"])
    found = await tp.store.get_paper(arxiv_id) if arxiv_id else None
    if found is None:
        return _fail(request, 404, "That paper is not stored here.")
    card, like = await pages.paper_page(tp.store, found)
    if _wants_json(request):
        return web.json_response({**card.to_json(), "similar": [c.to_json() for c in like]})
    return _html("paper.html", card=card, like=like)


async def _health_body(request: web.Request) -> dict[str, object]:
    tp = request.app[_CONTEXT]
    run = await tp.store.last_run("poll", ok=True)
    last = run["finished_at"] if run else None
    age = (tp.clock() - parse_iso(last)).total_seconds() if last else None
    state = tp.delivery_state()
    depth = (await tp.store.outbox_counts()).get("pending", 0)
    limit = tp.fresh_seconds or 3 * tp.poll_seconds
    fresh = age is not None and age <= limit and state != "halted"
    return {
        "status": "ok",
        "fresh": fresh,
        "last_successful_poll": last,
        "seconds_since_poll": None if age is None else round(age),
        "outbox_pending": depth,
        "alerts_due_chats": await tp.store.count_instant_due(),
        "delivery": state,
    }


async def health(request: web.Request) -> web.Response:
    """Liveness, for the platform's health check: 200 while the process answers and its store
    can be read, from the first second (a first deploy's long backfill included). Whether
    arXiv was read recently is ``/healthz/fresh``'s question; the body says both."""
    try:
        body = await _health_body(request)
    except sqlite3.Error as exc:
        return web.json_response({"status": "unhealthy", "error": str(exc)}, status=503)
    return web.json_response(body)


async def freshness(request: web.Request) -> web.Response:
    """Freshness, for monitoring: 200 while polls succeed and delivery runs; 503 when the last
    successful poll is older than 3 poll intervals (or none has succeeded yet), or delivery is
    halted. Not for a platform's health check: a restart does not make arXiv answer."""
    body = await _health_body(request)
    if not body["fresh"]:
        body["status"] = "stale"
    return web.json_response(body, status=200 if body["fresh"] else 503)


async def telegram_update(request: web.Request) -> web.Response:
    """One update from Telegram (webhook mode): 403 without the right secret token, and then
    nothing is read or changed; 400 for a body that is not an update."""
    hook = request.app[_CONTEXT].webhook
    if hook is None:
        return web.json_response({"error": "Not in webhook mode."}, status=404)
    given = request.headers.get(SECRET_HEADER, "")  # undecodable bytes arrive as surrogates
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), hook.secret.encode()):
        return web.json_response({"error": "Wrong secret token."}, status=403)
    try:
        update = await request.json()
    except ValueError:
        update = None
    if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
        return web.json_response({"error": "Not a Telegram update."}, status=400)
    try:
        await hook.receive(update)
    except NotAccepting as exc:
        return web.json_response({"error": f"Try again later: {exc}."}, status=503)
    except Exception:  # unreadable: answering an error would make Telegram resend it forever
        log.exception("dropped update %d: it could not be read", update["update_id"])
    return web.Response(status=200)


def build_web_app(context: WebContext) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=1024 * 1024)
    app[_CONTEXT] = context
    app.router.add_get("/", catalogue)
    app.router.add_get("/api/topics", catalogue)
    app.router.add_get("/topics/{slug}", topic)
    app.router.add_get("/api/topics/{slug}", topic)
    app.router.add_get("/q", query_page)
    app.router.add_get("/api/q", query_page)
    app.router.add_get("/papers/{arxiv_id:.+}", paper)
    app.router.add_get("/api/papers/{arxiv_id:.+}", paper)
    app.router.add_get("/healthz", health)
    app.router.add_get("/healthz/fresh", freshness)
    app.router.add_post(WEBHOOK_PATH, telegram_update)
    return app


__all__ = ["WEBHOOK_PATH", "NotAccepting", "WebContext", "Webhook", "build_web_app"]
