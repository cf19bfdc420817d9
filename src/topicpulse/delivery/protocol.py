"""What the engine asks of a sender, and what a sender may answer.

The Telegram adapter (``bot.sender``) maps the Bot API's errors onto these exceptions, which
keeps the engine free of Telegram objects. Each says what retrying would do:

* ``ChatGone``: the bot can send this chat nothing (blocked, kicked, no right to write, no such
  chat) — deactivate it until it comes back;
* ``MediaForbidden``: the chat takes text but not photos — send the text alone;
* ``MessageRejected``: this message's HTML or length — send it again as plain text;
* ``PermanentFailure``: anything else Telegram refuses for good — drop the message;
* ``FloodWait``, ``TemporaryFailure``: try again later; ``ChatMoved``: at the chat's new id;
* ``MaybeSent``: Telegram took the request but its answer did not come in time — the message
  was most likely delivered: never send it again;
* ``TopicClosed``: the forum topic the message goes to is closed — a problem of the chat, not
  of the message: keep it, tell the chat's admins once, try again later;
* ``ThreadGone``: the forum topic was deleted — send to the chat's General topic instead.
"""

from __future__ import annotations

from typing import Protocol

# Inline buttons: each item a row — one (label, callback data) button, or a list side by side.
Buttons = list[tuple[str, str] | list[tuple[str, str]]]


class DeliveryError(Exception):
    """Base of what a sender can report."""


class ChatGone(DeliveryError):
    """The bot can send this chat nothing: it blocked the bot, removed or muted it, was
    deleted, or does not exist. Stop sending to it (until it comes back)."""


class ChatMoved(DeliveryError):
    """The group became a supergroup with a new id."""

    def __init__(self, new_chat_id: int) -> None:
        super().__init__(f"chat moved to {new_chat_id}")
        self.new_chat_id = new_chat_id


class FloodWait(DeliveryError):
    """Telegram asked us to wait ``seconds`` before sending to this chat again (HTTP 429)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"flood wait {seconds}s")
        self.seconds = seconds


class MediaForbidden(DeliveryError):
    """The chat lets the bot send text but not photos (a group's restricted permissions)."""


class PermanentFailure(DeliveryError):
    """Telegram refused this message for good (a 400 that is not about the chat's rights):
    retrying won't help."""


class MessageRejected(PermanentFailure):
    """Telegram refused this message's content (bad HTML, too long — which formatting makes
    impossible): the same text as plain text may still go."""


class TemporaryFailure(DeliveryError):
    """Network error or 5xx: try again later."""


class MaybeSent(DeliveryError):
    """The request reached Telegram but no answer came in time (a read timeout): the message
    may well have been delivered, so sending it again could send it twice."""


class TopicClosed(DeliveryError):
    """The forum topic (``thread_id``; None: General) is closed to the bot (400
    TOPIC_CLOSED)."""

    def __init__(self, thread_id: int | None, description: str = "TOPIC_CLOSED") -> None:
        super().__init__(description)
        self.thread_id = thread_id


class ThreadGone(DeliveryError):
    """The forum topic (``thread_id``) no longer exists ("message thread not found")."""

    def __init__(self, thread_id: int, description: str = "message thread not found") -> None:
        super().__init__(description)
        self.thread_id = thread_id


class Sender(Protocol):
    """Sends one message; raises one of the errors above when it cannot. ``buttons`` are
    inline buttons (``Buttons``: a row each); ``thread_id`` is the forum topic to post in
    (None: General, or a chat without topics). The engine passes them only to the messages
    that have some, so senders that predate them keep working.

    ``send_photo`` takes the image's bytes (an upload) or the id Telegram gave an earlier
    upload of it, and returns that id when it has one (None otherwise): the engine uploads a
    chart once and sends the id to the other chats."""

    async def send_text(
        self,
        chat_id: int,
        html: str,
        *,
        preview: bool = False,
        buttons: Buttons | None = None,
        thread_id: int | None = None,
    ) -> None: ...

    async def send_plain(
        self, chat_id: int, text: str, *, thread_id: int | None = None
    ) -> None: ...

    async def send_photo(
        self, chat_id: int, photo: bytes | str, caption_html: str, *, thread_id: int | None = None
    ) -> str | None: ...
