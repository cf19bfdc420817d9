"""A fake Telegram Bot API server for tests and benchmarks.

:class:`FakeTelegram` is a small aiohttp server on ``127.0.0.1`` that speaks the real Bot API
wire protocol, so the *real* python-telegram-bot ``Bot``/``Application`` can be pointed at it::

    fake = FakeTelegram()
    await fake.start()
    app = (ApplicationBuilder().token(fake.token)
           .base_url(fake.base_url).base_file_url(fake.base_file_url).build())

Requests arrive as ``POST /bot<token>/<method>`` with ``application/x-www-form-urlencoded``
bodies (what PTB sends when there is no file), ``multipart/form-data`` (uploads) or
``application/json``; GET with a query string works too.  Every answer has Telegram's real
shape: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N, "description": ...,
"parameters": {...}}`` with the matching HTTP status, so PTB raises the same exceptions it
raises in production (``RetryAfter``, ``ChatMigrated``, ``Forbidden``, ``BadRequest``, ...).

What it covers
--------------
* Methods: getMe, getUpdates (long polling with ``offset``/``limit``/``timeout``; a second poll
  terminates the first with 409 like Telegram; refused with 409 while a webhook is set),
  setWebhook/deleteWebhook/getWebhookInfo (with a webhook set, queued updates are POSTed to it
  one at a time, in order, with the ``X-Telegram-Bot-Api-Secret-Token`` header; an update
  leaves the queue only on a 2xx answer, anything else is retried with backoff and shows as
  ``last_error_message``),
  set/get/deleteMyCommands, logOut, close, sendMessage, sendPhoto, sendDocument (multipart
  uploads, bytes are kept), copyMessage, forwardMessage, editMessageText,
  editMessageCaption, editMessageReplyMarkup, deleteMessage, answerCallbackQuery,
  getChatMember, getChatAdministrators, getChat, sendChatAction, getFile (+ file download
  under ``base_file_url``).  Unknown methods answer 404 ``Not Found``; a wrong token 401.
* Telegram's HTML parse mode (``telegram_html``: same tags, attributes, entity decoding,
  error texts and *byte* offsets as Telegram), the resulting ``entities`` in the returned
  ``Message``, and length limits counted in UTF-16 code units after entity parsing
  (4096 for text, 1024 for captions).  Leading/trailing whitespace is stripped like Telegram.
* Errors: blocked chats (403), migrated groups (400 + ``migrate_to_chat_id``; optionally the
  two service messages, ``migrate_to_chat_id`` and ``migrate_from_chat_id``), "message is not
  modified", "message to edit not found", too long / empty text, over-long ``callback_data``,
  injected failures (:meth:`FakeTelegram.fail_next`) and an unreachable period that drops
  connections (:meth:`FakeTelegram.set_unreachable`).
* The bot's own membership (:meth:`FakeTelegram.set_bot_member`): kicked, left, restricted
  (no text messages → 400 "not enough rights to send text messages to the chat", no photos →
  the same for photos) or back; each change is queued as a ``my_chat_member`` update, and
  ``getChatMember`` for the bot answers the current status.
* Flood control (``enforce_limits=True``): a global token bucket, per-private-chat buckets and
  per-group 20-per-minute windows, answered with 429 + ``retry_after``; hammering a penalised
  scope escalates (doubles) the penalty.  All of it runs on the injected ``clock``.
* ``latency``: every request sleeps that long before it is processed; requests are served
  concurrently.  Per-request work is O(1) apart from parsing the request's own text.
* Slow answers (:meth:`FakeTelegram.answer_slowly`): chosen calls are processed and recorded at
  once (the message *is* delivered) and answered only after a delay, in real seconds — what a
  client's read timeout meets when Telegram is busy.
* Forum supergroups (:meth:`FakeTelegram.make_forum`, :meth:`FakeTelegram.create_topic`,
  :meth:`FakeTelegram.close_topic`, ``reopen_topic``, ``delete_topic``): ``user_sends(...,
  thread_id=N)`` carries ``message_thread_id`` and ``is_topic_message``; a send with
  ``message_thread_id`` (or replying to a topic message) is posted in that topic and says so;
  a closed topic (General included) answers 400 ``Bad Request: TOPIC_CLOSED`` unless the bot
  may manage topics, an unknown or deleted one ``Bad Request: message thread not found``
  (also for a thread id in a chat without topics).
* ``hold_sends``/``release_sends``: accepted sends wait for their answer at a gate, so that a
  test can catch the bot mid-send without racing it; ``in_flight``, ``held`` and
  ``open_connections`` tell what the server is still working on.

What it deliberately does not do
--------------------------------
* No inline mode, payments, stickers, polls, media groups or business features; no
  ``inline_message_id`` edits; no forum-topic *methods* (createForumTopic, …: a test opens and
  closes topics through the knobs above) and no topic service messages.
* MarkdownV2/Markdown are *not* validated (the text is accepted verbatim, no entities), and no
  automatic entities (url/mention/hashtag) are detected in the bot's own messages.
* Deliberately stricter than Telegram in one respect: a bare ``&`` that does not start one of
  ``&lt; &gt; &amp; &quot; &#N; &#xH;`` is rejected (Telegram's docs require escaping it, tdlib
  silently keeps it).  Pass ``strict_html_entities=False`` to get tdlib's lenient behaviour.
* Chats are not checked for existence: any positive id is a private chat, any negative id a
  group (``-100XXXXXXXXXX``, i.e. <= -10**12, a supergroup).  Use ``fail_next(...,
  description="Bad Request: chat not found")`` to simulate unknown chats.
* Uploaded images are only sniffed for their dimensions (PNG/JPEG/GIF); nothing is resized.
* The real Telegram limits are undocumented and fuzzier than these buckets; the numbers here
  are the commonly quoted ones (30 msg/s overall, ~1 msg/s per private chat, 20/min per group).
* ``allowed_updates`` is ignored, every queued update is delivered.
* Long-poll ``timeout`` and :meth:`FakeTelegram.wait_for` timeouts use the event loop's real
  time; rate limiting, :meth:`FakeTelegram.set_unreachable` windows and recorded call times
  use ``clock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web

from telegram_html import (
    TelegramHTMLError,
    parse_telegram_html,
    strip_message_text,
    utf16_len,
)

__all__ = [
    "ApiCall",
    "FakeTelegram",
    "SentMessage",
    "UploadedFile",
]

# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------

MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
MAX_CALLBACK_DATA_BYTES = 64
#: The placeholder ``from`` of messages sent on behalf of a chat: an anonymous group
#: administrator (every one, in every group), and a channel posting as itself.
ANONYMOUS_ADMIN = {
    "id": 1087968824,
    "is_bot": True,
    "first_name": "Group",
    "username": "GroupAnonymousBot",
}
CHANNEL_BOT = {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"}
#: Methods that count against flood control (when ``enforce_limits`` is on).
RATE_LIMITED_METHODS = frozenset(
    {"sendMessage", "sendPhoto", "sendDocument", "editMessageText", "copyMessage", "forwardMessage"}
)
_MAX_PENALTY = 3600
_GROUP_WINDOW = 60.0

_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
_GETUPDATES_CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

# Parameter coercion for form-encoded / multipart bodies, where PTB sends every non-string
# value JSON-encoded and strings verbatim (see telegram/request/_requestparameter.py).
_INT_PARAMS = frozenset(
    {
        "message_id",
        "offset",
        "limit",
        "user_id",
        "from_chat_id",
        "message_thread_id",
        "reply_to_message_id",
        "cache_time",
        "max_connections",
    }
)
_BOOL_PARAMS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "disable_web_page_preview",
        "show_alert",
        "allow_sending_without_reply",
        "has_spoiler",
        "drop_pending_updates",
        "show_caption_above_media",
        "disable_content_type_detection",
        "allow_paid_broadcast",
        "remove_caption",
    }
)
_JSON_PARAMS = frozenset(
    {
        "reply_markup",
        "entities",
        "caption_entities",
        "link_preview_options",
        "reply_parameters",
        "allowed_updates",
        "commands",
        "scope",
        "media",
    }
)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class UploadedFile:
    """A file part of a multipart request (kept in :attr:`ApiCall.params`)."""

    filename: str
    content_type: str
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class ApiCall:
    """One request the fake received.

    ``result`` is ``"ok"``, the error code (``400``, ``429``, ...), ``"dropped"`` when the
    connection was dropped (:meth:`FakeTelegram.set_unreachable`) or ``"abandoned"`` for a
    long poll whose client had already gone away when it ended.
    """

    method: str
    params: dict[str, Any]
    time: float
    result: Literal["ok", "dropped", "abandoned"] | int = "ok"
    description: str | None = None

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    @property
    def error_code(self) -> int | None:
        return self.result if isinstance(self.result, int) else None


@dataclass(slots=True)
class SentMessage:
    """A send/edit the fake accepted.

    ``text`` is the text or caption *as the bot sent it* (raw HTML if ``parse_mode`` is HTML);
    ``plain_text`` is what a user sees (entities parsed, whitespace stripped).
    """

    method: str
    chat_id: int
    message_id: int
    text: str | None
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    disable_web_page_preview: bool | None
    link_preview_options: dict[str, Any] | None
    photo_bytes: bytes | None
    time: float
    plain_text: str | None = None
    entities: list[dict[str, Any]] = field(default_factory=list)
    document_bytes: bytes | None = field(default=None, repr=False)
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    thread_id: int | None = None  # the forum topic it was posted in (None: General / none)

    @property
    def buttons(self) -> list[tuple[str, str | None]]:
        """Flat list of ``(text, callback_data or url)`` for every keyboard button."""
        if not self.reply_markup:
            return []
        rows = self.reply_markup.get("inline_keyboard") or self.reply_markup.get("keyboard") or []
        result: list[tuple[str, str | None]] = []
        for row in rows:
            for button in row:
                if isinstance(button, str):
                    result.append((button, None))
                    continue
                value = button.get("callback_data")
                if value is None:
                    value = button.get("url")
                result.append((button.get("text", ""), value))
        return result

    @property
    def link_preview_disabled(self) -> bool:
        """Whether the bot asked for no link preview (either API spelling)."""
        if self.disable_web_page_preview:
            return True
        return bool(self.link_preview_options and self.link_preview_options.get("is_disabled"))


# ---------------------------------------------------------------------------------------------
# Internal helpers
# ---------------------------------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, code: int, description: str, parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters


class _Drop(Exception):
    """Drop the connection without answering."""


class _Abandoned(Exception):
    """The client of a long poll is gone; nothing to answer."""


def _error_payload(exc: _ApiError) -> dict[str, Any]:
    """Telegram's answer to a failed request."""
    payload: dict[str, Any] = {"ok": False, "error_code": exc.code, "description": exc.description}
    if exc.parameters:
        payload["parameters"] = exc.parameters
    return payload


def _bad(description: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: {description}")


@dataclass(slots=True)
class _Injection:
    status: int
    description: str
    retry_after: int | None
    remaining: int
    chat_id: int | None


@dataclass(slots=True)
class _Slow:
    delay: float
    remaining: int | None  # None: every matching call
    chat_id: int | None


@dataclass(slots=True)
class _Topic:
    name: str
    closed: bool = False


@dataclass(slots=True)
class _Penalty:
    until: float
    retry: int
    issued: float


class _TokenBucket:
    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def wait_time(self, now: float) -> float:
        if now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
        if self.tokens >= 1.0:
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def consume(self) -> None:
        self.tokens -= 1.0


class _SlidingWindow:
    __slots__ = ("limit", "stamps", "window")

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self.stamps: deque[float] = deque()

    def wait_time(self, now: float) -> float:
        stamps = self.stamps
        while stamps and now - stamps[0] >= self.window:
            stamps.popleft()
        if len(stamps) < self.limit:
            return 0.0
        return self.window - (now - stamps[0])

    def consume(self, now: float) -> None:
        self.stamps.append(now)


@dataclass(slots=True)
class _StoredMessage:
    data: dict[str, Any]
    from_bot: bool


_FILE_HEAD = 1024  # bytes of a sent file ``forget_history`` keeps (an image's size is in them)


def _image_size(data: bytes) -> tuple[int, int] | None:
    """Width/height of a PNG, GIF or JPEG; None if it is not a recognised image."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                i += 1 if marker == 0xFF else 2
                continue
            seg_len = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(width), int(height)
            i += 2 + seg_len
        return 512, 512
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return 512, 512
    return None


def _group_type(chat_id: int) -> str:
    """Supergroup/channel ids look like -100XXXXXXXXXX; shorter negative ids are basic groups."""
    return "supergroup" if chat_id <= -1_000_000_000_000 else "group"


def _coerce_param(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key in _JSON_PARAMS:
        try:
            return json.loads(value)
        except ValueError:
            if key == "reply_markup":
                raise _bad("can't parse reply keyboard markup JSON object") from None
            raise _bad(f"can't parse {key} JSON object") from None
    if key == "chat_id":
        stripped = value.strip()
        if stripped.lstrip("-").isdigit():
            return int(stripped)
        return value
    if key in _INT_PARAMS:
        try:
            return int(value)
        except ValueError:
            return value
    if key in _BOOL_PARAMS:
        return value.strip().lower() in ("true", "1")
    return value


# ---------------------------------------------------------------------------------------------
# The fake server
# ---------------------------------------------------------------------------------------------


class FakeTelegram:
    """A local, faithful-enough Telegram Bot API server (see the module docstring)."""

    def __init__(
        self,
        *,
        token: str = "123456:TEST-token-not-real",
        bot_username: str = "topicpulse_test_bot",
        latency: float = 0.0,
        enforce_limits: bool = False,
        global_rate: float = 30.0,
        private_rate: float = 1.0,
        private_burst: int = 3,
        group_per_minute: int = 20,
        clock: Callable[[], float] = time.monotonic,
        strict_html_entities: bool = True,
        flood_grace: float = 0.2,
    ) -> None:
        bot_id_part = token.split(":", 1)[0]
        if not bot_id_part.isdigit():
            raise ValueError("token must look like '<digits>:<secret>'")
        self.token = token
        self.bot_username = bot_username
        self.bot_id = int(bot_id_part)
        self.latency = latency
        self.enforce_limits = enforce_limits
        self.global_rate = global_rate
        self.private_rate = private_rate
        self.private_burst = private_burst
        self.group_per_minute = group_per_minute
        self.strict_html_entities = strict_html_entities
        #: A request to a penalised scope escalates the penalty only if it arrives at least this
        #: long after the 429 was issued (requests already in flight are not punished twice).
        self.flood_grace = flood_grace
        self._clock = clock

        self.bot_user: dict[str, Any] = {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "TopicPulse (test)",
            "username": bot_username,
        }

        # What the bot did.
        self.sent: list[SentMessage] = []
        self.calls: list[ApiCall] = []
        self.callback_answers: dict[str, dict[str, Any]] = {}
        self.chat_actions: list[tuple[int, str]] = []
        #: Counters: ``requests`` (all), ``ok`` (successful answers of any method),
        #: ``accepted`` (successful sends/edits == ``len(sent)``), ``dropped`` (connections
        #: dropped while unreachable), ``abandoned`` (long polls whose client had left),
        #: ``max_in_flight`` (peak concurrent requests), ``by_error_code`` {429: n, ...} and
        #: ``by_method`` {"sendMessage": n, ...}.
        self.stats: dict[str, Any] = {
            "requests": 0,
            "ok": 0,
            "accepted": 0,
            "dropped": 0,
            "abandoned": 0,
            "max_in_flight": 0,
            "by_error_code": {},
            "by_method": {},
        }
        self._sent_by_chat: dict[int, list[SentMessage]] = {}

        # World state.
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._user_ids_by_name: dict[str, int] = {}
        self._messages: dict[tuple[int, int], _StoredMessage] = {}
        self._next_message_id: dict[int, int] = {}
        self._admins: dict[int, set[int]] = {}
        self._owners: dict[int, int] = {}
        self._blocked: set[int] = set()
        self._bot_members: dict[int, dict[str, Any]] = {}  # set_bot_member: the bot's status
        self._migrated: dict[int, int] = {}
        self._files: dict[str, tuple[bytes, str, str]] = {}  # file_id -> (data, unique, path)
        self._file_paths: dict[str, bytes] = {}
        self._sent_files: list[str] = []  # files the bot sent since ``forget_history``
        self._file_counter = itertools.count(1)
        self._callback_queries: dict[str, dict[str, Any]] = {}
        self._callback_counter = itertools.count(1)
        self._commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._webhook_url = ""
        self._webhook_secret = ""
        self._webhook_error: tuple[int, str] | None = None  # (unix time, message)
        self._webhook_task: asyncio.Task[None] | None = None
        self._webhook_wake = asyncio.Event()
        self.webhook_posts: list[tuple[int, int]] = []  # (update_id, HTTP status; 0: no answer)

        # Updates / long polling.
        self._updates: deque[dict[str, Any]] = deque()
        self._next_update_id = 10_000
        self._poller: asyncio.Future[str] | None = None

        # Behaviour knobs.
        self._injections: dict[str, list[_Injection]] = {}
        self._slow: dict[str, list[_Slow]] = {}
        self._forums: dict[int, dict[int, _Topic]] = {}  # chat → thread id → topic
        self._general_closed: set[int] = set()
        self._unreachable_until = -math.inf

        # Flood control state.
        self._global_bucket: _TokenBucket | None = None
        self._private_buckets: dict[int, _TokenBucket] = {}
        self._group_windows: dict[int, _SlidingWindow] = {}
        self._penalties: dict[Any, _Penalty] = {}

        self._in_flight = 0
        self._hold_at: int | None = None  # hold_sends: answers beyond this many accepted wait
        self._hold_methods = RATE_LIMITED_METHODS  # (hold_sends: the methods it holds)
        self._gate = asyncio.Event()
        self._held = 0
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._stopping = False
        self._methods = self._build_dispatch()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and start serving."""
        if self._runner is not None:
            raise RuntimeError("FakeTelegram already started")
        self._stopping = False
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop serving; pending long polls are answered with an empty list first."""
        if self._runner is None:
            return
        self._stopping = True
        self._wake_poller("stop")
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
            self._webhook_task = None
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeTelegram is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/bot`` - PTB appends the token."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # ------------------------------------------------------------------ without the socket

    def call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One request as the server would answer it — the same methods, limits, errors and
        records — minus HTTP: (status, Telegram's JSON answer). For simulations that run on a
        virtual clock in one process (``bench/bench_scale.py``); ``params`` as PTB's
        ``RequestData.json_parameters`` (JSON-encoded values). ``getUpdates`` is not served."""
        entry = self._methods.get(method.lower())
        name = entry[0] if entry is not None else method
        try:
            args = {key: _coerce_param(key, value) for key, value in params.items()}
            if entry is None or name == "getUpdates":
                raise _ApiError(404, "Not Found")
            self._maybe_inject(name, args)
            result = entry[1](args)
        except _ApiError as exc:
            self._record(name, params, exc.code, exc.description)
            return exc.code, _error_payload(exc)
        self._record(name, params, "ok")
        return 200, {"ok": True, "result": result}

    def forget_history(self) -> None:
        """Drop the records of what was sent (``sent``, ``calls``, the stored messages, the
        bytes of the files the bot sent) but keep the counters, the limits' state, the chats
        and the file ids: a long simulation reads its records as it goes and keeps memory
        flat."""
        self.sent.clear()
        self.calls.clear()
        self._sent_by_chat.clear()
        self._messages.clear()
        # the bytes of the files the bot sent (a chart a /momentum): only their head is kept,
        # which gives an image's size, so that a file_id sent again still works
        for file_id in self._sent_files:
            data, unique_id, path = self._files[file_id]
            self._files[file_id] = (data[:_FILE_HEAD], unique_id, path)
            self._file_paths[path] = data[:_FILE_HEAD]
        self._sent_files.clear()

    # ------------------------------------------------------------------ driving the bot

    def add_update(self, update: dict[str, Any]) -> int:
        """Queue a raw update; ``update_id`` is assigned if missing.  Returns the update id.

        Like every driving method, call it from the event loop the fake runs on.
        """
        update = dict(update)
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        self._next_update_id = max(self._next_update_id, int(update["update_id"])) + 1
        self._updates.append(update)
        self._wake_poller("update")
        return int(update["update_id"])

    def user_sends(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
        username: str = "alice",
        reply_to: int | None = None,
        sender_chat: int | None = None,
        thread_id: int | None = None,
    ) -> int:
        """Queue a ``message`` update as if a user typed ``text``; returns the update id.
        ``thread_id``: in a forum (:meth:`make_forum`), the topic it is written in (None:
        General), carried as ``message_thread_id`` with ``is_topic_message``.
        ``reply_to``: the id of a message in the chat this one replies to (Telegram then
        carries that message, without its own reply, as ``reply_to_message``).

        A negative ``chat_id`` makes it a group (``-100XXXXXXXXXX`` a supergroup) even if
        ``chat_type`` is left at ``"private"``.  ``user_id`` defaults to ``chat_id`` in private
        chats and to a stable per-``username`` id in groups.

        ``sender_chat``: the message is sent on behalf of a chat, in a group. ``chat_id``
        itself: an anonymous administrator (``from`` is Telegram's placeholder user
        @GroupAnonymousBot, the same for every anonymous admin of every group); another id: a
        channel posting as itself (``from`` is @Channel_Bot). ``user_id`` and ``username``
        are then not shown.
        """
        chat = self._register_chat(chat_id, chat_type, chat_title, username)
        if sender_chat is not None:
            if chat["type"] not in ("group", "supergroup"):
                raise ValueError("only a group's messages are sent on behalf of a chat")
            if sender_chat == chat_id:
                user, on_behalf = dict(ANONYMOUS_ADMIN), chat
            else:
                user, on_behalf = dict(CHANNEL_BOT), self._channel(sender_chat)
        else:
            if user_id is None:
                user_id = chat_id if chat["type"] == "private" else self._user_id_for(username)
            user = self._register_user(user_id, username)
        message: dict[str, Any] = {
            "message_id": self._alloc_message_id(chat_id),
            "from": user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if sender_chat is not None:
            message["sender_chat"] = on_behalf
        if thread_id is not None:
            if thread_id not in self._forums.get(chat_id, {}):
                raise ValueError(f"chat {chat_id} has no forum topic {thread_id}")
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            replied = self._messages[(chat_id, reply_to)].data
            message["reply_to_message"] = {
                k: v for k, v in replied.items() if k != "reply_to_message"
            }
        if text.startswith("/"):
            command = text.split(maxsplit=1)[0] if text.strip() else text
            message["entities"] = [
                {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            ]
        self._messages[(chat_id, message["message_id"])] = _StoredMessage(message, from_bot=False)
        return self.add_update({"message": message})

    def user_sends_document(
        self,
        chat_id: int,
        data: bytes,
        file_name: str,
        *,
        caption: str | None = None,
        user_id: int | None = None,
        chat_type: str = "private",
        username: str = "alice",
        mime_type: str = "application/octet-stream",
    ) -> int:
        """Queue a ``message`` update carrying a file (a ``document``), as if a user sent
        ``data`` named ``file_name`` with an optional ``caption``; the bot can fetch it with
        getFile and the file URL, as from Telegram. Returns the update id."""
        chat = self._register_chat(chat_id, chat_type, None, username)
        if user_id is None:
            user_id = chat_id if chat["type"] == "private" else self._user_id_for(username)
        file_id, unique_id, _ = self._store_file(data, "documents")
        message: dict[str, Any] = {
            "message_id": self._alloc_message_id(chat_id),
            "from": self._register_user(user_id, username),
            "chat": chat,
            "date": int(time.time()),
            "document": {
                "file_id": file_id,
                "file_unique_id": unique_id,
                "file_name": file_name,
                "mime_type": mime_type,
                "file_size": len(data),
            },
        }
        if caption is not None:
            message["caption"] = caption
            if caption.startswith("/"):
                command = caption.split(maxsplit=1)[0]
                message["caption_entities"] = [
                    {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
                ]
        self._messages[(chat_id, message["message_id"])] = _StoredMessage(message, from_bot=False)
        return self.add_update({"message": message})

    def user_presses(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        username: str = "alice",
    ) -> int:
        """Queue a ``callback_query`` update for a button on message ``message_id``.

        If the fake does not know the message (e.g. it was deleted) the update carries an
        ``InaccessibleMessage`` (``date`` 0), like Telegram does for old messages.
        """
        chat = self._register_chat(chat_id, chat_type, None, username)
        if user_id is None:
            user_id = chat_id if chat["type"] == "private" else self._user_id_for(username)
        user = self._register_user(user_id, username)
        stored = self._messages.get((chat_id, message_id))
        message = (
            stored.data
            if stored is not None
            else {"chat": chat, "message_id": message_id, "date": 0}
        )
        query_id = str(4_000_000_000_000_000_000 + next(self._callback_counter))
        query = {
            "id": query_id,
            "from": user,
            "message": message,
            "chat_instance": str(abs(chat_id) * 7919 + 13),
            "data": data,
        }
        self._callback_queries[query_id] = query
        return self.add_update({"callback_query": query})

    # ------------------------------------------------------------------ inspecting

    def messages_to(self, chat_id: int) -> list[SentMessage]:
        """Accepted sends/edits to ``chat_id``, in order."""
        return list(self._sent_by_chat.get(chat_id, ()))

    def calls_to(self, method: str) -> list[ApiCall]:
        """All recorded calls of ``method`` (case-insensitive)."""
        wanted = method.lower()
        return [call for call in self.calls if call.method.lower() == wanted]

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by the bot (via a later ``offset``)."""
        return len(self._updates)

    @property
    def long_poll_waiting(self) -> bool:
        """Whether a getUpdates long poll is currently parked waiting for updates."""
        return self._poller is not None and not self._poller.done()

    @property
    def in_flight(self) -> int:
        """Requests received and not answered yet (held ones included)."""
        return self._in_flight

    @property
    def held(self) -> int:
        """Accepted sends whose answer :meth:`hold_sends` holds back."""
        return self._held

    @property
    def open_connections(self) -> int:
        """Client connections the server still serves. A connection the client closed counts
        until the request it carried is answered: once this is 0 after a client died, every
        request of that client the fake will ever see has been handled and recorded."""
        return len(self._runner.server.connections) if self._runner and self._runner.server else 0

    def message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """The current state of a stored message (as a Bot API ``Message`` dict)."""
        stored = self._messages.get((chat_id, message_id))
        return stored.data if stored is not None else None

    async def wait_for(
        self, predicate: Callable[[SentMessage], bool], timeout: float = 5.0
    ) -> SentMessage:
        """Wait until an accepted message matching ``predicate`` exists and return it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        checked = 0
        while True:
            sent = self.sent
            while checked < len(sent):
                candidate = sent[checked]
                checked += 1
                if predicate(candidate):
                    return candidate
            if loop.time() >= deadline:
                raise AssertionError(f"no matching message within {timeout}s; {self.summary()}")
            await asyncio.sleep(0.01)

    async def wait_for_messages(
        self, chat_id: int, count: int, timeout: float = 5.0
    ) -> list[SentMessage]:
        """Wait until at least ``count`` messages went to ``chat_id``; returns all of them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            messages = self._sent_by_chat.get(chat_id, [])
            if len(messages) >= count:
                return list(messages)
            if loop.time() >= deadline:
                raise AssertionError(
                    f"expected {count} messages to chat {chat_id} within {timeout}s, got "
                    f"{len(messages)}; {self.summary()}"
                )
            await asyncio.sleep(0.01)

    def summary(self, last: int = 15) -> str:
        """Human-readable summary of recent traffic, used in assertion messages."""
        lines = [
            f"{len(self.sent)} accepted message(s), {len(self.calls)} call(s), "
            f"errors={self.stats['by_error_code']}"
        ]
        for msg in self.sent[-last:]:
            shown = (msg.text or "")[:100].replace("\n", "\\n")
            lines.append(f"  {msg.method} chat={msg.chat_id} id={msg.message_id}: {shown!r}")
        failed = [c for c in self.calls[-200:] if not c.ok][-5:]
        for call in failed:
            lines.append(f"  FAILED {call.method} -> {call.result} {call.description}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ behaviour knobs

    def set_chat_admins(
        self, chat_id: int, admin_user_ids: set[int], *, owner_id: int | None = None
    ) -> None:
        """getChatMember answers "administrator" for these users ("creator" for ``owner_id``)."""
        admins = set(admin_user_ids)
        if owner_id is not None:
            admins.add(owner_id)
            self._owners[chat_id] = owner_id
        else:
            self._owners.pop(chat_id, None)
        self._admins[chat_id] = admins

    def hold_sends(self, after: int = 0, methods: Iterable[str] = RATE_LIMITED_METHODS) -> None:
        """Answer ``after`` more accepted sends (the flood-controlled methods, or ``methods``);
        the ones accepted after them stay unanswered, in flight, until :meth:`release_sends`. A
        client can be caught (or killed) mid-send without racing it: its messages were
        delivered, but it does not know yet."""
        self._hold_at = len(self.sent) + after
        self._hold_methods = frozenset(methods)

    def release_sends(self) -> None:
        """Answer the held sends, and stop holding."""
        self._hold_at = None
        self._gate.set()
        self._gate = asyncio.Event()

    def block_chat(self, chat_id: int) -> None:
        """Sends to ``chat_id`` fail with 403 (blocked by the user / kicked from the group)."""
        self._blocked.add(chat_id)

    def unblock_chat(self, chat_id: int) -> None:
        self._blocked.discard(chat_id)

    def set_bot_member(
        self,
        chat_id: int,
        status: Literal["creator", "administrator", "member", "restricted", "left", "kicked"],
        *,
        can_send_messages: bool = True,
        can_send_photos: bool = True,
        username: str = "alice",
        notify: bool = True,
    ) -> int | None:
        """The bot's status in ``chat_id`` becomes ``status``, as when a group's administrator
        (``username``) kicks, restricts or re-adds it — or, in a private chat, when the user
        blocks (``"kicked"``) or unblocks (``"member"``) it.

        From then on sends behave accordingly: ``left``/``kicked`` answer 403 (like
        :meth:`block_chat`); ``restricted`` without ``can_send_messages`` answers sendMessage
        with 400 ``not enough rights to send text messages to the chat``, without
        ``can_send_photos`` sendPhoto with ``… photos to the chat``; any other status sends
        normally. Unless ``notify`` is false, the change is queued as a ``my_chat_member``
        update (old and new status), like Telegram does; returns its update id.
        """
        chat = self._chat(chat_id)
        old = self._bot_members.get(chat_id) or self._bot_member_dict("member")
        new = self._bot_member_dict(
            status, can_send_messages=can_send_messages, can_send_photos=can_send_photos
        )
        self._bot_members[chat_id] = new
        if status in ("left", "kicked"):
            self._blocked.add(chat_id)
        else:
            self._blocked.discard(chat_id)
        if not notify:
            return None
        user_id = chat_id if chat["type"] == "private" else self._user_id_for(username)
        changed = {
            "chat": chat,
            "from": self._register_user(user_id, username),
            "date": int(time.time()),
            "old_chat_member": old,
            "new_chat_member": new,
        }
        return self.add_update({"my_chat_member": changed})

    def _bot_member_dict(
        self, status: str, *, can_send_messages: bool = True, can_send_photos: bool = True
    ) -> dict[str, Any]:
        bot = dict(self.bot_user)
        if status == "creator":
            return {"status": "creator", "user": bot, "is_anonymous": False}
        if status == "administrator":
            return {**self._admin_rights(), "status": "administrator", "user": bot}
        if status == "restricted":
            media = {
                f"can_send_{kind}": can_send_photos if kind == "photos" else True
                for kind in (
                    "audios",
                    "documents",
                    "photos",
                    "videos",
                    "video_notes",
                    "voice_notes",
                )
            }
            return {
                "status": "restricted",
                "user": bot,
                "is_member": True,
                "can_send_messages": can_send_messages,
                **media,
                "can_send_polls": True,
                "can_send_other_messages": True,
                "can_add_web_page_previews": True,
                "can_change_info": False,
                "can_invite_users": False,
                "can_pin_messages": False,
                "can_manage_topics": False,
                "can_edit_tag": False,
                "can_react_to_messages": True,
                "until_date": 0,
            }
        if status == "kicked":
            return {"status": "kicked", "user": bot, "until_date": 0}
        if status in ("member", "left"):
            return {"status": status, "user": bot}
        raise ValueError(f"unknown chat member status {status!r}")

    def _check_right(self, chat_id: int, right: str, what: str) -> None:
        """A restricted bot (``set_bot_member``) without ``right`` may not send ``what``."""
        member = self._bot_members.get(chat_id)
        if member is not None and member["status"] == "restricted" and not member.get(right):
            raise _bad(f"not enough rights to send {what} to the chat")

    def migrate_chat(
        self,
        chat_id: int,
        new_chat_id: int,
        *,
        notify: bool = False,
        username: str = "alice",
        supergroup_first: bool = False,
    ) -> tuple[int, int] | None:
        """The group ``chat_id`` became supergroup ``new_chat_id`` (upgraded by ``username``);
        from then on a call naming ``chat_id`` answers 400 with ``migrate_to_chat_id``.

        With ``notify``, the two service messages Telegram sends are queued, one after the
        other (a bot handling updates concurrently gets them together): in the old group a
        message with ``migrate_to_chat_id``, in the supergroup one with
        ``migrate_from_chat_id``; ``supergroup_first`` queues the supergroup's first. Returns
        their update ids (old group's, supergroup's)."""
        self._migrated[chat_id] = new_chat_id
        old = self._chat(chat_id)
        title = old.get("title") or f"Group {new_chat_id}"
        self._chats[new_chat_id] = {"id": new_chat_id, "title": title, "type": "supergroup"}
        if not notify:
            return None
        user = self._register_user(self._user_id_for(username), username)
        date = int(time.time())
        notices = {
            chat_id: {"chat": old, "migrate_to_chat_id": new_chat_id},
            new_chat_id: {"chat": self._chats[new_chat_id], "migrate_from_chat_id": chat_id},
        }
        ids: dict[int, int] = {}
        for target in (new_chat_id, chat_id) if supergroup_first else (chat_id, new_chat_id):
            message = {
                "message_id": self._alloc_message_id(target),
                "from": user,
                "date": date,
                **notices[target],
            }
            self._messages[(target, message["message_id"])] = _StoredMessage(
                message, from_bot=False
            )
            ids[target] = self.add_update({"message": message})
        return ids[chat_id], ids[new_chat_id]

    def fail_next(
        self,
        method: str,
        *,
        status: int,
        description: str,
        retry_after: int | None = None,
        count: int = 1,
        chat_id: int | None = None,
    ) -> None:
        """Make the next ``count`` calls of ``method`` (optionally only for ``chat_id``) fail.

        ``description`` is sent verbatim (e.g. ``"Bad Request: chat not found"``).  A 429
        without ``retry_after`` gets ``retry_after=1`` since Telegram always sends one.
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        self._injections.setdefault(method.lower(), []).append(
            _Injection(status, description, retry_after, count, chat_id)
        )

    def answer_slowly(
        self,
        method: str,
        *,
        delay: float,
        chat_id: int | None = None,
        count: int | None = None,
    ) -> None:
        """The next ``count`` calls of ``method`` (every one if None; optionally only for
        ``chat_id``) are processed and recorded at once — a send is delivered — but answered
        only ``delay`` real seconds later (a client's read timeout is on real time), or when
        the fake stops."""
        self._slow.setdefault(method.lower(), []).append(_Slow(delay, count, chat_id))

    def make_forum(self, chat_id: int, *, title: str | None = None) -> dict[str, Any]:
        """Make ``chat_id`` (a supergroup, -100…) a forum: its chat says ``is_forum``, and
        its messages can be in topics (:meth:`create_topic`). Returns the chat."""
        if _group_type(chat_id) != "supergroup":
            raise ValueError("only supergroups (-100XXXXXXXXXX) can be forums")
        chat = self._register_chat(chat_id, "supergroup", title, "")
        chat["is_forum"] = True
        self._forums.setdefault(chat_id, {})
        return chat

    def create_topic(self, chat_id: int, name: str) -> int:
        """A new topic in the forum ``chat_id``; returns its ``message_thread_id`` (like
        Telegram: the id of the message that created it)."""
        if chat_id not in self._forums:
            self.make_forum(chat_id)
        thread_id = self._alloc_message_id(chat_id)
        self._forums[chat_id][thread_id] = _Topic(name)
        return thread_id

    def close_topic(self, chat_id: int, thread_id: int | None) -> None:
        """Close a topic (None: General): the bot's sends there answer TOPIC_CLOSED."""
        self._set_closed(chat_id, thread_id, True)

    def reopen_topic(self, chat_id: int, thread_id: int | None) -> None:
        self._set_closed(chat_id, thread_id, False)

    def delete_topic(self, chat_id: int, thread_id: int) -> None:
        """Delete a topic: sends there answer "message thread not found"."""
        del self._forums[chat_id][thread_id]

    def _set_closed(self, chat_id: int, thread_id: int | None, closed: bool) -> None:
        if chat_id not in self._forums:
            raise ValueError(f"chat {chat_id} is not a forum")
        if thread_id is None:
            (self._general_closed.add if closed else self._general_closed.discard)(chat_id)
        else:
            self._forums[chat_id][thread_id].closed = closed

    def set_unreachable(self, seconds: float) -> None:
        """For ``seconds`` (on ``clock``) every request has its connection dropped unanswered.

        Pending long polls are dropped too.  ``set_unreachable(0)`` ends the outage.
        """
        self._unreachable_until = self._clock() + seconds
        if seconds > 0:
            self._wake_poller("drop")

    # ------------------------------------------------------------------ HTTP layer

    def _wake_poller(self, reason: str) -> None:
        self._webhook_wake.set()
        poller = self._poller
        if poller is not None and not poller.done():
            poller.set_result(reason)

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.body_exists:
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    raise _bad("can't parse JSON object") from None
                if not isinstance(body, dict):
                    raise _bad("request body must be a JSON object")
                params.update(body)
            else:
                form = await request.post()
                for key, value in form.items():
                    if isinstance(value, web.FileField):
                        params[key] = UploadedFile(
                            filename=value.filename,
                            content_type=value.content_type,
                            data=value.file.read(),
                        )
                    elif isinstance(value, bytes | bytearray):
                        params[key] = bytes(value).decode("utf-8", "replace")
                    else:
                        params[key] = value
        return {key: _coerce_param(key, value) for key, value in params.items()}

    @staticmethod
    def _json_response(payload: dict[str, Any], status: int = 200) -> web.Response:
        return web.Response(
            body=json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(),
            status=status,
            content_type="application/json",
        )

    def _drop(self, request: web.Request) -> web.Response:
        transport = request.transport
        if transport is not None:
            transport.abort()
        return web.Response(status=500)  # never reaches the client

    def _unreachable(self) -> bool:
        return self._clock() < self._unreachable_until

    def _record(
        self,
        method: str,
        params: dict[str, Any],
        result: Literal["ok", "dropped", "abandoned"] | int,
        description: str | None = None,
    ) -> None:
        self.calls.append(ApiCall(method, params, self._clock(), result, description))
        stats = self.stats
        stats["requests"] += 1
        by_method = stats["by_method"]
        by_method[method] = by_method.get(method, 0) + 1
        if result == "ok":
            stats["ok"] += 1
        elif isinstance(result, str):
            stats[result] += 1
        else:
            by_code = stats["by_error_code"]
            by_code[result] = by_code.get(result, 0) + 1

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._in_flight += 1
        if self._in_flight > self.stats["max_in_flight"]:
            self.stats["max_in_flight"] = self._in_flight
        try:
            return await self._handle_request(request)
        finally:
            self._in_flight -= 1

    async def _handle_request(self, request: web.Request) -> web.StreamResponse:
        raw_method = request.match_info["method"]
        entry = self._methods.get(raw_method.lower())
        method = entry[0] if entry is not None else raw_method
        if self._unreachable():
            self._record(method, {}, "dropped")
            return self._drop(request)
        try:
            params = await self._read_params(request)
        except _ApiError as exc:
            params = {}
            error: _ApiError | None = exc
        else:
            error = None
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self._unreachable():
            self._record(method, params, "dropped")
            return self._drop(request)
        try:
            if request.match_info["token"] != self.token:
                raise _ApiError(401, "Unauthorized")
            if entry is None:
                raise _ApiError(404, "Not Found")
            if error is not None:
                raise error
            self._maybe_inject(method, params)
            handler = entry[1]
            if method == "getUpdates":
                result = await self._get_updates(request, params)
            else:
                result = handler(params)
        except _Abandoned:
            # a long poll whose client already went away (e.g. PTB cancelled it on shutdown)
            self._record(method, params, "abandoned")
            return self._drop(request)
        except _Drop:
            self._record(method, params, "dropped")
            return self._drop(request)
        except _ApiError as exc:
            self._record(method, params, exc.code, exc.description)
            return self._json_response(_error_payload(exc), exc.code)
        self._record(method, params, "ok")
        delay = self._slow_delay(method, params)
        if delay > 0:
            await asyncio.sleep(delay)
        while (
            self._hold_at is not None
            and len(self.sent) > self._hold_at
            and method in self._hold_methods
        ):
            self._held += 1
            try:
                await self._gate.wait()
            finally:
                self._held -= 1
        return self._json_response({"ok": True, "result": result})

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return self._json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
            )
        data = self._file_paths.get(request.match_info["path"])
        if data is None:
            return self._json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, 404
            )
        return web.Response(body=data, content_type="application/octet-stream")

    def _slow_delay(self, method: str, params: dict[str, Any]) -> float:
        rules = self._slow.get(method.lower())
        if not rules:
            return 0.0
        chat_id = params.get("chat_id")
        for index, rule in enumerate(rules):
            if rule.chat_id is None or rule.chat_id == chat_id:
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        del rules[index]
                return rule.delay
        return 0.0

    def _thread_for(
        self, chat_id: int, params: dict[str, Any], reply_to: dict[str, Any] | None
    ) -> int | None:
        """The forum topic a send goes to (its ``message_thread_id``, else the topic of the
        message it replies to); refused like Telegram when closed or unknown."""
        thread = params.get("message_thread_id")
        if thread is None and reply_to is not None and reply_to.get("is_topic_message"):
            thread = reply_to.get("message_thread_id")
        topics = self._forums.get(chat_id)
        if topics is None:
            if thread is not None:
                raise _bad("message thread not found")
            return None
        if thread is not None and thread not in topics:
            raise _bad("message thread not found")
        closed = topics[thread].closed if thread is not None else chat_id in self._general_closed
        member = self._bot_members.get(chat_id) or {}
        manages = member.get("status") == "creator" or member.get("can_manage_topics")
        if closed and not manages:
            raise _bad("TOPIC_CLOSED")
        return thread  # type: ignore[no-any-return]

    def _maybe_inject(self, method: str, params: dict[str, Any]) -> None:
        queue = self._injections.get(method.lower())
        if not queue:
            return
        chat_id = params.get("chat_id")
        for index, injection in enumerate(queue):
            if injection.chat_id is None or injection.chat_id == chat_id:
                injection.remaining -= 1
                if injection.remaining <= 0:
                    del queue[index]
                parameters = (
                    {"retry_after": injection.retry_after}
                    if injection.retry_after is not None
                    else None
                )
                raise _ApiError(injection.status, injection.description, parameters)

    # ------------------------------------------------------------------ world helpers

    def _user_id_for(self, username: str) -> int:
        uid = self._user_ids_by_name.get(username)
        if uid is None:
            uid = 100_001 + len(self._user_ids_by_name)
            self._user_ids_by_name[username] = uid
        return uid

    def _register_user(self, user_id: int, username: str) -> dict[str, Any]:
        user = {
            "id": user_id,
            "is_bot": False,
            "first_name": username.capitalize() or "User",
            "username": username,
            "language_code": "en",
        }
        self._users[user_id] = user
        return user

    def _user(self, user_id: int) -> dict[str, Any]:
        if user_id == self.bot_id:
            return dict(self.bot_user)
        return self._users.get(
            user_id, {"id": user_id, "is_bot": False, "first_name": f"User {user_id}"}
        )

    def _register_chat(
        self, chat_id: int, chat_type: str, title: str | None, username: str
    ) -> dict[str, Any]:
        if chat_id < 0 and chat_type in ("private", ""):
            chat_type = _group_type(chat_id)
        if chat_type == "private":
            chat: dict[str, Any] = {
                "id": chat_id,
                "first_name": username.capitalize() or "User",
                "username": username,
                "type": "private",
            }
        else:
            chat = {"id": chat_id, "title": title or f"Group {chat_id}", "type": chat_type}
        known = self._chats.get(chat_id)
        if known is not None and known.get("type") == chat["type"] and title is None:
            return known
        if chat_id in self._forums:
            chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def _channel(self, chat_id: int) -> dict[str, Any]:
        """A channel's chat (registered as one on first sight)."""
        known = self._chats.get(chat_id)
        if known is not None and known.get("type") == "channel":
            return known
        if chat_id > -1_000_000_000_000:
            raise ValueError(f"{chat_id} is not a channel id (-100XXXXXXXXXX)")
        channel = {"id": chat_id, "title": f"Channel {chat_id}", "type": "channel"}
        self._chats[chat_id] = channel
        return channel

    def _chat(self, chat_id: int) -> dict[str, Any]:
        chat = self._chats.get(chat_id)
        if chat is None:
            if chat_id > 0:
                chat = {"id": chat_id, "first_name": f"User {chat_id}", "type": "private"}
            else:
                kind = _group_type(chat_id)
                chat = {"id": chat_id, "title": f"Group {chat_id}", "type": kind}
            self._chats[chat_id] = chat
        return chat

    def _alloc_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _chat_id(self, params: dict[str, Any], key: str = "chat_id") -> int:
        value = params.get(key)
        if value is None or value == "":
            raise _bad(f"{key} is empty")
        if not isinstance(value, int) or isinstance(value, bool):
            raise _bad("chat not found")
        if key == "chat_id" or key == "from_chat_id":
            target = self._migrated.get(value)
            if target is not None:
                raise _ApiError(
                    400,
                    "Bad Request: group chat was upgraded to a supergroup chat",
                    {"migrate_to_chat_id": target},
                )
        return value

    def _writable_chat(self, params: dict[str, Any]) -> int:
        chat_id = self._chat_id(params)
        if chat_id in self._blocked:
            if chat_id > 0:
                raise _ApiError(403, "Forbidden: bot was blocked by the user")
            kind = self._chat(chat_id)["type"]
            if kind == "channel":
                raise _ApiError(403, "Forbidden: bot is not a member of the channel chat")
            raise _ApiError(403, f"Forbidden: bot was kicked from the {kind} chat")
        return chat_id

    def _render(
        self, source: str, parse_mode: Any, entities: Any
    ) -> tuple[str, list[dict[str, Any]]]:
        mode = str(parse_mode or "").lower()
        if mode == "html":
            try:
                visible, parsed = parse_telegram_html(
                    source, strict_entities=self.strict_html_entities
                )
            except TelegramHTMLError as exc:
                raise _bad(f"can't parse entities: {exc}") from None
        elif mode in ("markdown", "markdownv2"):
            visible, parsed = source, []
        elif mode == "":
            visible = source
            parsed = [dict(e) for e in entities] if isinstance(entities, list) else []
        else:
            raise _bad("unsupported parse_mode")
        return strip_message_text(visible, parsed)

    def _text_content(
        self, params: dict[str, Any], *, edit: bool
    ) -> tuple[str, str, list[dict[str, Any]]]:
        source = params.get("text")
        if not isinstance(source, str) or not source:
            raise _bad("message text is empty")
        visible, entities = self._render(source, params.get("parse_mode"), params.get("entities"))
        if not visible:
            raise _bad("message text is empty")
        if utf16_len(visible) > MAX_TEXT_LENGTH:
            raise _bad("MESSAGE_TOO_LONG" if edit else "message is too long")
        return source, visible, entities

    def _caption_content(
        self, params: dict[str, Any]
    ) -> tuple[str | None, str, list[dict[str, Any]]]:
        source = params.get("caption")
        if not isinstance(source, str) or not source:
            return None, "", []
        visible, entities = self._render(
            source, params.get("parse_mode"), params.get("caption_entities")
        )
        if utf16_len(visible) > MAX_CAPTION_LENGTH:
            raise _bad("message caption is too long")
        return source, visible, entities

    @staticmethod
    def _check_markup(markup: Any) -> dict[str, Any] | None:
        """Validate reply_markup; returns the part Telegram echoes (inline keyboards only)."""
        if markup is None:
            return None
        if not isinstance(markup, dict):
            raise _bad("can't parse reply keyboard markup JSON object")
        if "force_reply" in markup:
            if markup["force_reply"] is not True:
                raise _bad("can't parse reply keyboard markup JSON object")
            if len(str(markup.get("input_field_placeholder", ""))) > 64:
                raise _bad("input field placeholder is too long")
            return None
        if "inline_keyboard" not in markup:
            return None
        rows = markup["inline_keyboard"]
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise _bad("can't parse inline keyboard markup JSON object")
        for row in rows:
            for button in row:
                if not isinstance(button, dict) or not button.get("text"):
                    raise _bad("can't parse inline keyboard button: Text must be non-empty")
                data = button.get("callback_data")
                if data is not None:
                    size = len(str(data).encode("utf-8"))
                    if size == 0 or size > MAX_CALLBACK_DATA_BYTES:
                        raise _bad("BUTTON_DATA_INVALID")
                elif not any(key != "text" for key in button):
                    raise _bad(
                        "can't parse inline keyboard button: Text buttons are unallowed in the "
                        "inline keyboard"
                    )
        return {"inline_keyboard": rows}

    # ------------------------------------------------------------------ flood control

    def _flood(self, retry_after: int) -> _ApiError:
        return _ApiError(
            429, f"Too Many Requests: retry after {retry_after}", {"retry_after": retry_after}
        )

    def _check_limits(self, method: str, chat_id: int) -> None:
        if not self.enforce_limits or method not in RATE_LIMITED_METHODS:
            return
        now = self._clock()
        chat_scope = ("chat", chat_id)
        for scope in (chat_scope, "global"):
            penalty = self._penalties.get(scope)
            if penalty is not None and now < penalty.until:
                if now - penalty.issued >= self.flood_grace:
                    penalty.retry = min(penalty.retry * 2, _MAX_PENALTY)
                    penalty.until = now + penalty.retry
                    penalty.issued = now
                raise self._flood(max(1, math.ceil(penalty.until - now)))

        chat_limiter: _TokenBucket | _SlidingWindow
        if chat_id > 0:
            bucket = self._private_buckets.get(chat_id)
            if bucket is None:
                bucket = _TokenBucket(self.private_rate, self.private_burst, now)
                self._private_buckets[chat_id] = bucket
            chat_limiter = bucket
        else:
            window = self._group_windows.get(chat_id)
            if window is None:
                window = _SlidingWindow(self.group_per_minute, _GROUP_WINDOW)
                self._group_windows[chat_id] = window
            chat_limiter = window
        if self._global_bucket is None:
            self._global_bucket = _TokenBucket(self.global_rate, max(1.0, self.global_rate), now)

        for scope, wait in (
            (chat_scope, chat_limiter.wait_time(now)),
            ("global", self._global_bucket.wait_time(now)),
        ):
            if wait > 0:
                retry = max(1, math.ceil(wait))
                self._penalties[scope] = _Penalty(until=now + retry, retry=retry, issued=now)
                raise self._flood(retry)

        self._global_bucket.consume()
        if isinstance(chat_limiter, _SlidingWindow):
            chat_limiter.consume(now)
        else:
            chat_limiter.consume()

    # ------------------------------------------------------------------ message helpers

    def _new_message(self, chat_id: int, **fields: Any) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": self._alloc_message_id(chat_id),
            "from": self.bot_user,
            "chat": self._chat(chat_id),
            "date": int(time.time()),
        }
        message.update({k: v for k, v in fields.items() if v is not None and v != []})
        self._messages[(chat_id, message["message_id"])] = _StoredMessage(message, from_bot=True)
        return message

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            target_id = reply.get("message_id")
            allow = bool(reply.get("allow_sending_without_reply"))
            target_chat = reply.get("chat_id", chat_id)
        else:
            target_id = params.get("reply_to_message_id")
            allow = bool(params.get("allow_sending_without_reply"))
            target_chat = chat_id
        if target_id is None:
            return None
        stored = self._messages.get((target_chat, target_id))
        if stored is None:
            if allow:
                return None
            raise _bad("message to be replied not found")
        return {k: v for k, v in stored.data.items() if k != "reply_to_message"}

    def _record_sent(
        self,
        method: str,
        chat_id: int,
        message: dict[str, Any],
        params: dict[str, Any],
        *,
        source: str | None,
        plain: str | None,
        entities: list[dict[str, Any]],
        photo_bytes: bytes | None = None,
        document_bytes: bytes | None = None,
    ) -> None:
        lpo = params.get("link_preview_options")
        markup = params.get("reply_markup")
        sent = SentMessage(
            method=method,
            chat_id=chat_id,
            message_id=message["message_id"],
            text=source,
            parse_mode=params.get("parse_mode"),
            reply_markup=markup if isinstance(markup, dict) else None,
            disable_web_page_preview=params.get("disable_web_page_preview"),
            link_preview_options=lpo if isinstance(lpo, dict) else None,
            photo_bytes=photo_bytes,
            time=self._clock(),
            plain_text=plain,
            entities=entities,
            document_bytes=document_bytes,
            params=params,
            thread_id=message.get("message_thread_id"),
        )
        self.sent.append(sent)
        self._sent_by_chat.setdefault(chat_id, []).append(sent)
        self.stats["accepted"] += 1

    def _store_file(
        self, data: bytes, suffix: str, *, by_bot: bool = False
    ) -> tuple[str, str, str]:
        n = next(self._file_counter)
        file_id = f"AgACAgIAAxkBAAIB{n:08d}FakeFileId{self.bot_id}"
        unique_id = f"AQAD{n:06d}x"
        path = f"{suffix}/file_{n}"
        self._files[file_id] = (data, unique_id, path)
        self._file_paths[path] = data
        if by_bot:
            self._sent_files.append(file_id)
        return file_id, unique_id, path

    def _find_message(self, params: dict[str, Any], missing: str) -> tuple[int, _StoredMessage]:
        if params.get("inline_message_id") is not None and params.get("chat_id") is None:
            raise _bad("MESSAGE_ID_INVALID")
        chat_id = self._writable_chat(params)
        message_id = params.get("message_id")
        if message_id is None:
            raise _bad("message identifier is not specified")
        stored = self._messages.get((chat_id, message_id))
        if stored is None:
            raise _bad(missing)
        return chat_id, stored

    # ------------------------------------------------------------------ API methods

    def _build_dispatch(self) -> dict[str, tuple[str, Callable[[dict[str, Any]], Any]]]:
        handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "getMe": self._m_get_me,
            "getUpdates": lambda p: None,  # handled asynchronously in _handle
            "logOut": lambda p: True,
            "close": lambda p: True,
            "setWebhook": self._m_set_webhook,
            "deleteWebhook": self._m_delete_webhook,
            "getWebhookInfo": self._m_get_webhook_info,
            "setMyCommands": self._m_set_my_commands,
            "getMyCommands": self._m_get_my_commands,
            "deleteMyCommands": self._m_delete_my_commands,
            "sendMessage": self._m_send_message,
            "sendPhoto": self._m_send_photo,
            "sendDocument": self._m_send_document,
            "copyMessage": self._m_copy_message,
            "forwardMessage": self._m_forward_message,
            "editMessageText": self._m_edit_message_text,
            "editMessageCaption": self._m_edit_message_caption,
            "editMessageReplyMarkup": self._m_edit_message_reply_markup,
            "deleteMessage": self._m_delete_message,
            "answerCallbackQuery": self._m_answer_callback_query,
            "getChatMember": self._m_get_chat_member,
            "getChatAdministrators": self._m_get_chat_administrators,
            "getChat": self._m_get_chat,
            "sendChatAction": self._m_send_chat_action,
            "getFile": self._m_get_file,
        }
        return {name.lower(): (name, handler) for name, handler in handlers.items()}

    def _m_get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def _get_updates(
        self, request: web.Request, params: dict[str, Any]
    ) -> list[dict[str, Any]]:
        if self._webhook_url:
            raise _ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use "
                "deleteWebhook to delete the webhook first",
            )
        offset = params.get("offset")
        limit = params.get("limit")
        limit = 100 if not isinstance(limit, int) else min(max(limit, 1), 100)
        raw_timeout = params.get("timeout")
        try:
            timeout = max(0.0, float(raw_timeout)) if raw_timeout is not None else 0.0
        except (TypeError, ValueError):
            timeout = 0.0
        updates = self._updates
        if isinstance(offset, int) and offset != 0:
            if offset > 0:
                while updates and updates[0]["update_id"] < offset:
                    updates.popleft()
            else:
                while len(updates) > -offset:
                    updates.popleft()
        # A new getUpdates terminates a pending one, exactly like Telegram.
        self._wake_poller("conflict")
        if updates or timeout <= 0 or self._stopping:
            return list(itertools.islice(updates, limit))
        loop = asyncio.get_running_loop()
        poller: asyncio.Future[str] = loop.create_future()
        self._poller = poller
        deadline = loop.time() + timeout
        try:
            while not poller.done() and (left := deadline - loop.time()) > 0:
                await asyncio.wait({poller}, timeout=min(left, 0.05))
                if not poller.done() and (
                    request.transport is None or request.transport.is_closing()
                ):
                    raise _Abandoned()  # the client went away (a killed bot): stop waiting
        finally:
            if self._poller is poller:
                self._poller = None
        reason = poller.result() if poller.done() else "timeout"
        if reason == "conflict":
            if request.transport is None or request.transport.is_closing():
                raise _Abandoned()
            raise _ApiError(409, _GETUPDATES_CONFLICT)
        if reason == "drop":
            raise _Drop()
        if reason == "stop":
            return []
        return list(itertools.islice(self._updates, limit))

    def _m_set_webhook(self, params: dict[str, Any]) -> bool:
        url = str(params.get("url") or "")
        secret = str(params.get("secret_token") or "")
        # Telegram wants HTTPS; plain HTTP is allowed here for a bot on this machine.
        if url and not url.startswith(("https://", "http://127.0.0.1:", "http://localhost:")):
            raise _bad("bad webhook: HTTPS url must be provided for webhook")
        if secret and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            raise _bad("secret token contains unallowed characters")
        self._webhook_url, self._webhook_secret = url, secret
        self._webhook_error = None
        if params.get("drop_pending_updates"):
            self._updates.clear()
        if url and self._webhook_task is None:
            self._webhook_task = asyncio.get_running_loop().create_task(self._push_updates())
        self._webhook_wake.set()
        return True

    def _m_delete_webhook(self, params: dict[str, Any]) -> bool:
        self._webhook_url = self._webhook_secret = ""
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _m_get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": self._webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self._webhook_error is not None:
            info["last_error_date"], info["last_error_message"] = self._webhook_error
        return info

    async def _push_updates(self) -> None:
        """Webhook delivery: the oldest queued update, POSTed until the bot answers 2xx."""
        delay = 0.05
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            while True:
                if not self._webhook_url or not self._updates or self._stopping:
                    self._webhook_wake.clear()
                    await self._webhook_wake.wait()
                    continue
                update = self._updates[0]
                headers = {}
                if self._webhook_secret:
                    headers["X-Telegram-Bot-Api-Secret-Token"] = self._webhook_secret
                try:
                    async with session.post(
                        self._webhook_url, json=update, headers=headers
                    ) as response:
                        status, reason = response.status, response.reason or ""
                        await response.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    status, reason = 0, type(exc).__name__
                self.webhook_posts.append((int(update["update_id"]), status))
                if 200 <= status < 300:
                    if self._updates and self._updates[0] is update:
                        self._updates.popleft()
                    delay = 0.05
                    continue
                message = f"Wrong response from the webhook: {status} {reason}"
                self._webhook_error = (int(time.time()), message if status else reason)
                self._webhook_wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._webhook_wake.wait(), delay)
                delay = min(delay * 2, 2.0)

    @staticmethod
    def _commands_key(params: dict[str, Any]) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    def _m_set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise _bad("BOT_COMMANDS_TOO_MUCH" if isinstance(commands, list) else "commands empty")
        for command in commands:
            if not isinstance(command, dict):
                raise _bad("BOT_COMMAND_INVALID")
            name = str(command.get("command", ""))
            description = str(command.get("description", ""))
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name) or not 1 <= len(description) <= 256:
                raise _bad("BOT_COMMAND_INVALID")
        self._commands[self._commands_key(params)] = [dict(c) for c in commands]
        return True

    def _m_get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._commands.get(self._commands_key(params), [])

    def _m_delete_my_commands(self, params: dict[str, Any]) -> bool:
        self._commands.pop(self._commands_key(params), None)
        return True

    def _m_send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        self._check_right(chat_id, "can_send_messages", "text messages")
        source, visible, entities = self._text_content(params, edit=False)
        markup = self._check_markup(params.get("reply_markup"))
        reply_to = self._reply_target(chat_id, params)
        thread = self._thread_for(chat_id, params, reply_to)
        self._check_limits("sendMessage", chat_id)
        lpo = params.get("link_preview_options")
        message = self._new_message(
            chat_id,
            message_thread_id=thread,
            is_topic_message=True if thread is not None else None,
            reply_to_message=reply_to,
            text=visible,
            entities=entities,
            link_preview_options=lpo if isinstance(lpo, dict) and lpo else None,
            reply_markup=markup,
        )
        self._record_sent(
            "sendMessage",
            chat_id,
            message,
            params,
            source=source,
            plain=visible,
            entities=entities,
        )
        return message

    def _m_send_photo(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        self._check_right(chat_id, "can_send_photos", "photos")
        photo = params.get("photo")
        source, caption, entities = self._caption_content(params)
        markup = self._check_markup(params.get("reply_markup"))
        reply_to = self._reply_target(chat_id, params)
        data: bytes | None
        if isinstance(photo, UploadedFile):
            data = photo.data
            size = _image_size(data) if data else None
            if size is None:
                raise _bad("IMAGE_PROCESS_FAILED")
        elif isinstance(photo, str) and photo in self._files:
            data = self._files[photo][0]
            size = _image_size(data) or (800, 600)
        elif isinstance(photo, str) and photo.startswith(("http://", "https://")):
            data, size = None, (800, 600)
        elif photo in (None, ""):
            raise _bad("there is no photo in the request")
        else:
            raise _bad("wrong file identifier/HTTP URL specified")
        thread = self._thread_for(chat_id, params, reply_to)
        self._check_limits("sendPhoto", chat_id)
        photo_sizes = self._photo_sizes(data or b"", size)
        message = self._new_message(
            chat_id,
            message_thread_id=thread,
            is_topic_message=True if thread is not None else None,
            reply_to_message=reply_to,
            photo=photo_sizes,
            caption=caption or None,
            caption_entities=entities,
            reply_markup=markup,
        )
        self._record_sent(
            "sendPhoto",
            chat_id,
            message,
            params,
            source=source,
            plain=caption,
            entities=entities,
            photo_bytes=data,
        )
        return message

    def _photo_sizes(self, data: bytes, size: tuple[int, int]) -> list[dict[str, Any]]:
        width, height = size
        longest = max(width, height, 1)
        targets = [t for t in (90, 320, 800, 1280) if t < longest]
        sizes: list[dict[str, Any]] = []
        for target in [*targets, min(longest, 2560)]:
            scale = target / longest
            w, h = max(1, round(width * scale)), max(1, round(height * scale))
            file_id, unique_id, _ = self._store_file(data, "photos", by_bot=True)
            sizes.append(
                {
                    "file_id": file_id,
                    "file_unique_id": unique_id,
                    "width": w,
                    "height": h,
                    "file_size": max(1, round(len(data) * scale * scale)) if data else 1,
                }
            )
        return sizes

    def _m_send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        document = params.get("document")
        source, caption, entities = self._caption_content(params)
        markup = self._check_markup(params.get("reply_markup"))
        reply_to = self._reply_target(chat_id, params)
        if isinstance(document, UploadedFile):
            if not document.data:
                raise _bad("file must be non-empty")
            data, name, mime = document.data, document.filename, document.content_type
        elif isinstance(document, str) and document in self._files:
            data, name, mime = self._files[document][0], "file", "application/octet-stream"
        elif document in (None, ""):
            raise _bad("there is no document in the request")
        else:
            raise _bad("wrong file identifier/HTTP URL specified")
        self._check_limits("sendDocument", chat_id)
        file_id, unique_id, _ = self._store_file(data, "documents", by_bot=True)
        message = self._new_message(
            chat_id,
            reply_to_message=reply_to,
            document={
                "file_id": file_id,
                "file_unique_id": unique_id,
                "file_name": name,
                "mime_type": mime,
                "file_size": len(data),
            },
            caption=caption or None,
            caption_entities=entities,
            reply_markup=markup,
        )
        self._record_sent(
            "sendDocument",
            chat_id,
            message,
            params,
            source=source,
            plain=caption,
            entities=entities,
            document_bytes=data,
        )
        return message

    def _source_message(self, params: dict[str, Any], missing: str) -> dict[str, Any]:
        from_chat = self._chat_id(params, "from_chat_id")
        message_id = params.get("message_id")
        stored = None
        if isinstance(message_id, int):
            stored = self._messages.get((from_chat, message_id))
        if stored is None:
            raise _bad(missing)
        return stored.data

    def _m_copy_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        source = self._source_message(params, "message to copy not found")
        self._check_limits("copyMessage", chat_id)
        content = {
            k: v
            for k, v in source.items()
            if k not in ("message_id", "from", "chat", "date", "reply_to_message", "edit_date")
        }
        message = self._new_message(chat_id, **content)
        self._record_sent(
            "copyMessage",
            chat_id,
            message,
            params,
            source=content.get("text") or content.get("caption"),
            plain=content.get("text") or content.get("caption"),
            entities=content.get("entities") or content.get("caption_entities") or [],
        )
        return {"message_id": message["message_id"]}

    def _m_forward_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        source = self._source_message(params, "message to forward not found")
        self._check_limits("forwardMessage", chat_id)
        content = {
            k: v
            for k, v in source.items()
            if k not in ("message_id", "from", "chat", "date", "reply_to_message", "edit_date")
        }
        origin = {
            "type": "user",
            "sender_user": source.get("from", self.bot_user),
            "date": source.get("date", 0),
        }
        message = self._new_message(chat_id, forward_origin=origin, **content)
        self._record_sent(
            "forwardMessage",
            chat_id,
            message,
            params,
            source=content.get("text") or content.get("caption"),
            plain=content.get("text") or content.get("caption"),
            entities=content.get("entities") or content.get("caption_entities") or [],
        )
        return message

    def _m_edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, stored = self._find_message(params, "message to edit not found")
        if not stored.from_bot:
            raise _bad("message can't be edited")
        message = stored.data
        if "text" not in message:
            raise _bad("there is no text in the message to edit")
        source, visible, entities = self._text_content(params, edit=True)
        markup = self._check_markup(params.get("reply_markup"))
        if (
            message.get("text") == visible
            and message.get("entities", []) == entities
            and message.get("reply_markup") == markup
        ):
            raise _bad(_NOT_MODIFIED[len("Bad Request: ") :])
        self._check_limits("editMessageText", chat_id)
        message["text"] = visible
        self._set_optional(message, "entities", entities)
        self._set_optional(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        self._record_sent(
            "editMessageText",
            chat_id,
            message,
            params,
            source=source,
            plain=visible,
            entities=entities,
        )
        return message

    def _m_edit_message_caption(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, stored = self._find_message(params, "message to edit not found")
        if not stored.from_bot:
            raise _bad("message can't be edited")
        message = stored.data
        if "text" in message:
            raise _bad("there is no caption in the message to edit")
        source, caption, entities = self._caption_content(params)
        markup = self._check_markup(params.get("reply_markup"))
        if (
            message.get("caption", "") == caption
            and message.get("caption_entities", []) == entities
            and message.get("reply_markup") == markup
        ):
            raise _bad(_NOT_MODIFIED[len("Bad Request: ") :])
        self._set_optional(message, "caption", caption or None)
        self._set_optional(message, "caption_entities", entities)
        self._set_optional(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        self._record_sent(
            "editMessageCaption",
            chat_id,
            message,
            params,
            source=source,
            plain=caption,
            entities=entities,
        )
        return message

    def _m_edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, stored = self._find_message(params, "message to edit not found")
        if not stored.from_bot:
            raise _bad("message can't be edited")
        message = stored.data
        markup = self._check_markup(params.get("reply_markup"))
        if message.get("reply_markup") == markup:
            raise _bad(_NOT_MODIFIED[len("Bad Request: ") :])
        self._set_optional(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        shown = message.get("text", message.get("caption"))
        self._record_sent(
            "editMessageReplyMarkup",
            chat_id,
            message,
            params,
            source=shown,
            plain=shown,
            entities=list(message.get("entities", message.get("caption_entities", []))),
        )
        return message

    @staticmethod
    def _set_optional(message: dict[str, Any], key: str, value: Any) -> None:
        if value is None or value == []:
            message.pop(key, None)
        else:
            message[key] = value

    def _m_delete_message(self, params: dict[str, Any]) -> bool:
        chat_id, stored = self._find_message(params, "message to delete not found")
        del self._messages[(chat_id, stored.data["message_id"])]
        return True

    def _m_answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self._callback_queries:
            raise _bad("query is too old and response timeout expired or query ID is invalid")
        text = params.get("text")
        if isinstance(text, str) and len(text) > 200:
            raise _bad("MESSAGE_TOO_LONG")
        self.callback_answers[query_id] = {
            k: v for k, v in params.items() if k != "callback_query_id"
        }
        return True

    @staticmethod
    def _admin_rights() -> dict[str, Any]:
        return {
            "can_be_edited": False,
            "is_anonymous": False,
            "can_manage_chat": True,
            "can_delete_messages": True,
            "can_manage_video_chats": True,
            "can_restrict_members": True,
            "can_promote_members": False,
            "can_change_info": True,
            "can_invite_users": True,
            "can_post_stories": False,
            "can_edit_stories": False,
            "can_delete_stories": False,
            "can_pin_messages": True,
            "can_manage_topics": False,
        }

    def _member(self, chat_id: int, user_id: int) -> dict[str, Any]:
        if user_id == self.bot_id and chat_id in self._bot_members:
            return dict(self._bot_members[chat_id])
        user = self._user(user_id)
        if self._owners.get(chat_id) == user_id:
            return {"status": "creator", "user": user, "is_anonymous": False}
        if user_id in self._admins.get(chat_id, ()):
            return {**self._admin_rights(), "status": "administrator", "user": user}
        return {"status": "member", "user": user}

    def _m_get_chat_member(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        user_id = params.get("user_id")
        if not isinstance(user_id, int):
            raise _bad("user_id is empty" if user_id in (None, "") else "invalid user_id specified")
        if chat_id > 0 and user_id not in (chat_id, self.bot_id):
            raise _bad("user not found")
        return self._member(chat_id, user_id)

    def _m_get_chat_administrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        chat_id = self._chat_id(params)
        if chat_id > 0:
            raise _bad("there are no administrators in the private chat")
        return [self._member(chat_id, uid) for uid in sorted(self._admins.get(chat_id, ()))]

    def _m_get_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        return {
            **self._chat(chat_id),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    def _m_send_chat_action(self, params: dict[str, Any]) -> bool:
        chat_id = self._writable_chat(params)
        action = params.get("action")
        if action not in _CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        self.chat_actions.append((chat_id, str(action)))
        return True

    def _m_get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = params.get("file_id")
        entry = self._files.get(file_id) if isinstance(file_id, str) else None
        if entry is None:
            raise _bad("invalid file_id")
        data, unique_id, path = entry
        return {
            "file_id": file_id,
            "file_unique_id": unique_id,
            "file_size": len(data),
            "file_path": path,
        }
