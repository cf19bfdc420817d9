"""The bot's own membership in a chat (``my_chat_member`` updates): a chat the bot can send
nothing to is inactive, and active again as soon as it can.

Telegram tells the bot when a user blocks or unblocks it, and when a group removes, restricts
or re-adds it. Kicked, left, or restricted without the right to send messages → the chat is
deactivated (its pending alerts dropped, its subscriptions kept); a member, an administrator,
or a restricted member that may send messages → active again, and alerts resume with the next
round. (Delivery deactivates a chat too when a send says it is gone; a command from the chat
reactivates it.)
"""

from __future__ import annotations

import logging

from telegram import ChatMember, ChatMemberRestricted, Update
from telegram.ext import Application, ChatMemberHandler, ContextTypes

from topicpulse.store import Store

log = logging.getLogger(__name__)


def may_send(member: ChatMember) -> bool:
    """Whether the bot, as this member of a chat, may send it messages."""
    if isinstance(member, ChatMemberRestricted):
        return member.is_member and member.can_send_messages
    return member.status in (
        ChatMember.MEMBER,
        ChatMember.ADMINISTRATOR,
        ChatMember.OWNER,
    )


def _store(context: ContextTypes.DEFAULT_TYPE) -> Store:
    store: Store = context.bot_data["pipeline"].store  # set in build_application's post_init
    return store


async def on_my_chat_member(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """The bot's status in a chat changed: (de)activate the chat accordingly."""
    changed = update.my_chat_member
    if changed is None:
        return
    chat, status = changed.chat, changed.new_chat_member.status
    store = _store(context)
    if may_send(changed.new_chat_member):
        known = await store.chat(chat.id)
        await store.ensure_chat(chat.id, type=chat.type, title=chat.title, reactivate=True)
        if known is not None and not known.active:
            log.info("chat %s can be written to again (%s): reactivated", chat.id, status)
        return
    known = await store.chat(chat.id)
    if known is None or not known.active:
        return
    dropped = await store.deactivate_chat(chat.id, f"bot is {status} in the chat")
    log.info(
        "chat %s took the bot's right to write (%s): deactivated, %d pending dropped"
        " (subscriptions kept)",
        chat.id,
        status,
        dropped,
    )


def register(app: Application) -> None:  # type: ignore[type-arg]
    """Handle the bot's own membership changes (``allowed_updates`` must include
    ``my_chat_member``: ``Update.ALL_TYPES`` does)."""
    app.add_handler(ChatMemberHandler(on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER))
