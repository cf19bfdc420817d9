"""A chat's settings: /digest, /timezone, /pause, /resume, /spikes, /settings, and the
administrators' /stats."""

from __future__ import annotations

from datetime import timedelta

from telegram import Update
from telegram.ext import ContextTypes

from topicpulse.bot import views
from topicpulse.bot.common import arg_text, chat_id_of, command, reply, services
from topicpulse.delivery import chats, weekly
from topicpulse.delivery.chats import UserError
from topicpulse.delivery.formatting import esc
from topicpulse.models import iso


@command(changes=True)
async def digest(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/digest instant|daily|weekly [HH:MM] [weekday]"""
    tp = services(context)
    args = arg_text(context).split()
    chat = await chats.set_digest(tp.store, chat_id_of(update), args, now=tp.clock())
    await weekly.reschedule(tp.store, chat, tp.clock())  # (the weekly /foryou comes with it)
    await reply(update, f"Delivery: <b>{esc(chats.describe_schedule(chat))}</b>.")


@command(changes=True)
async def timezone(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/timezone <Area/City>"""
    tp = services(context)
    text = arg_text(context)
    if not text:
        await reply(update, "Which time zone? E.g. <code>/timezone Europe/Berlin</code>.")
        return
    chat = await chats.set_timezone(tp.store, chat_id_of(update), text, now=tp.clock())
    await weekly.reschedule(tp.store, chat, tp.clock())
    await reply(
        update,
        f"Time zone set to <b>{esc(chat.timezone)}</b> ({esc(chats.describe_schedule(chat))}).",
    )


@command(changes=True)
async def pause(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await services(context).store.update_chat(chat_id_of(update), paused=1)
    await reply(update, "⏸ Paused: no alerts until /resume.")


@command(changes=True)
async def resume(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await services(context).store.update_chat(chat_id_of(update), paused=0)
    services(context).wake_delivery()
    await reply(update, "▶️ Resumed: new papers will arrive again.")


@command(changes=True)
async def spikes(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/spikes on|off"""
    value = arg_text(context).lower()
    if value not in ("on", "off"):
        raise UserError("Use /spikes on or /spikes off.")
    await services(context).store.update_chat(chat_id_of(update), spikes=int(value == "on"))
    await reply(update, f"Spike alerts <b>{value}</b>.")


@command()
async def settings_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    tp = services(context)
    chat = await tp.store.chat(chat_id_of(update))
    assert chat is not None
    await reply(update, views.settings(chat, await tp.store.count_subscriptions(chat.chat_id)))


@command()
async def stats(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/stats — admins (TOPICPULSE_ADMIN_IDS) only."""
    tp = services(context)
    user = update.effective_user
    if user is None or user.id not in tp.settings.admin_ids:
        await reply(update, "Sorry — /stats is for the bot's administrators.")
        return
    s = tp.store
    await reply(
        update,
        views.stats(
            papers_stored=await s.count_papers(),
            topics=await s.topics(),
            chat_counts=await s.chat_counts(),
            outbox=await s.outbox_counts(),
            last_poll=await s.last_run("poll"),
            errors=await s.recent_run_errors(iso(tp.clock() - timedelta(days=1))),
            unparsed=await s.unparsed_topics(),
            alerts_due=await s.count_instant_due(),
        ),
    )
