"""Delivery: turns the durable outbox into messages and hands them to a ``Sender``.

An outbox row is marked sent only after the sender returned (Telegram accepted the message), so
a crash or restart re-sends at most the messages that were in flight. What can go wrong on the
way is expressed by the exceptions of ``protocol``; the Telegram adapter (``bot.sender``) maps
the Bot API's errors onto them, which keeps this package free of Telegram objects.

How fast it goes is not decided here: the sender's rate limiter (``bot.ratelimit``) paces every
send to Telegram's limits. The engine's job is to keep that limiter busy — a pool of workers
pulls chats from the outbox (``engine``), each sending one chat's messages in order, enough of
them to hide the API's latency — and to react to what goes wrong one chat at a time
(``sending``):

* a 429 defers only that chat for ``retry_after`` (the workers move on to other chats);
* a chat the bot can send nothing to (403, chat not found, no right to send messages) is
  deactivated: its pending rows are dropped, its subscriptions kept; the bot's membership
  coming back (``bot.membership``) or a command from the chat reactivates it;
* a chat that takes text but not photos gets its spike alerts as text, without the chart;
* a message whose HTML Telegram refuses (or too long — which formatting makes impossible) is
  logged with its outbox ids and re-sent as plain text; any other 400 drops the message
  (logged), and the chat goes on with the next one;
* network errors and 5xx defer the chat with exponential backoff; a message that has failed
  so for ``GIVE_UP_AFTER`` (a day) while Telegram answers the others is dropped (logged).
  Telegram answering too slowly (the sender's read timeout) is no failure: the message was most
  likely delivered, and is settled as "maybe sent", never resent (``sending``).
  Several chats failing in a row (Telegram unreachable) pause all delivery, with growing
  pauses, until a send succeeds again; nothing is dropped meanwhile, and the outage counts
  against no message: the outbox keeps growing durably and drains afterwards.

* in a forum supergroup each alert goes to the topic its subscription came from; a closed
  topic (TOPIC_CLOSED) holds the chat's alerts — its admins are told once — until a send goes
  through again (``sending``, ``forums``).

Spike alerts go first, in every mode, never behind a backlog of papers; a spike's chart is
uploaded once and sent to the other chats by its ``file_id`` (``uploads``). Backpressure: a chat
whose backlog of papers would take more than ``fold_after`` alert messages gets one short
catch-up instead (``digests.catch_up``), which settles the whole backlog. Instant alerts and
digests are assembled from the rounds' matches since each chat's watermark, not from a row per
chat and paper (``alerts``, ``digests``, ``store.digests``); in a burst, the next chats' are
assembled ahead in a worker process while the loop sends (``prefetch``).
"""

from __future__ import annotations

from topicpulse.delivery.engine import BATCH, DEFAULT_CONCURRENCY, FOLD_AFTER, Delivery
from topicpulse.delivery.messages import (
    CATCH_UP_BEST,
    Outgoing,
    plain_text,
    spike_message,
)
from topicpulse.delivery.protocol import (
    Buttons,
    ChatGone,
    ChatMoved,
    DeliveryError,
    FloodWait,
    MaybeSent,
    MediaForbidden,
    MessageRejected,
    PermanentFailure,
    Sender,
    TemporaryFailure,
    ThreadGone,
    TopicClosed,
)
from topicpulse.delivery.sending import GIVE_UP_AFTER, DeliveryStats

__all__ = [
    "BATCH",
    "CATCH_UP_BEST",
    "DEFAULT_CONCURRENCY",
    "FOLD_AFTER",
    "GIVE_UP_AFTER",
    "Buttons",
    "ChatGone",
    "ChatMoved",
    "Delivery",
    "DeliveryError",
    "DeliveryStats",
    "FloodWait",
    "MaybeSent",
    "MediaForbidden",
    "MessageRejected",
    "Outgoing",
    "PermanentFailure",
    "Sender",
    "TemporaryFailure",
    "ThreadGone",
    "TopicClosed",
    "plain_text",
    "spike_message",
]
