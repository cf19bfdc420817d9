"""Forum supergroups whose topic is closed to the bot: telling the chat's admins, once.

Which topic a message goes to is the subscription's (``Outgoing.thread_id``); what the engine
does when that topic is closed is ``sending.Courier``'s (keep the rows, retry later).
"""

from __future__ import annotations

import logging

from topicpulse.delivery.protocol import DeliveryError, Sender, TopicClosed
from topicpulse.store import Store

log = logging.getLogger(__name__)

CLOSED_RETRY = 300.0  # seconds before a chat whose forum topic is closed is tried again, doubling
CLOSED_RETRY_MAX = 3600.0
TOPIC_CLOSED_NOTICE = (
    "⚠️ Alerts for this group are on hold: the topic they are posted in is closed. Reopen it"
    " (then any command, e.g. /list, resumes them at once), or /follow the topics again from"
    " an open topic. Nothing is lost meanwhile."
)


async def tell_closed(
    store: Store, sender: Sender, chat_id: int, closed: int | None
) -> bool | None:
    """Tell the chat that its alerts wait: in General, or, if General is what is closed, in
    the first other topic the chat follows from that takes the message. True if told; False
    if the message failed (to be tried again); None if no topic of the chat is open to it."""
    threads = set((await store.subscription_threads(chat_id)).values())
    places: list[int | None] = [None] if closed is not None else []
    places += sorted(t for t in threads if t is not None and t != closed)
    for place in places:
        try:
            if place is None:
                await sender.send_text(chat_id, TOPIC_CLOSED_NOTICE)
            else:
                await sender.send_text(chat_id, TOPIC_CLOSED_NOTICE, thread_id=place)
        except TopicClosed:
            continue
        except DeliveryError as exc:
            log.info("chat %s: could not say that its topic is closed (%s)", chat_id, exc)
            return False
        log.info("chat %s: told that its topic is closed (in %s)", chat_id, place or "General")
        return True
    log.warning("chat %s: no open topic to say that its alerts wait", chat_id)
    return None
