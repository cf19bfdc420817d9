"""An update's JSON, trimmed to what the handlers read before python-telegram-bot builds
objects from it.

A tap on a button brings the whole message under it: its text, its keyboard, and an entity
for every bold title, link and tag in it (an alert or a digest holds dozens).
python-telegram-bot makes an object of each: ~1 ms of the event loop per tap on a digest,
~0.3 ms without the entities (measured on this machine). No handler reads the entities of the
message under a button (the ratings read its text and its keyboard; commands' own entities,
which ``CommandHandler`` needs, are not touched), so they are left out, in both intakes:
long polling (``transport.UpdatesRequest``) and webhook (``serving.queue_update``).
"""

from __future__ import annotations

from typing import Any

UNREAD = ("entities", "caption_entities")  # of the message under a tapped button


def lighten(update: Any) -> Any:
    """The update without what no handler reads (changed in place; anything that is not an
    update is returned as it came)."""
    query = update.get("callback_query") if isinstance(update, dict) else None
    message = query.get("message") if isinstance(query, dict) else None
    if isinstance(message, dict):
        for field in UNREAD:
            message.pop(field, None)
    return update
