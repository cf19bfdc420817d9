"""Reading: /momentum, /trending, /latest, /search, /paper, /similar, and the buttons that show
papers (a catch-up's "latest", a card's "More like this")."""

from __future__ import annotations

import re

from telegram import Update
from telegram.constants import ParseMode
from telegram.ext import ContextTypes

from topicpulse import offload
from topicpulse.bot import callbacks, rating, views
from topicpulse.bot.common import (
    arg_text,
    chat_id_of,
    command,
    reply,
    reply_lines,
    reply_view,
    services,
)
from topicpulse.delivery import chats, formatting
from topicpulse.delivery.chats import UserError
from topicpulse.delivery.formatting import esc, shorten
from topicpulse.insight import momentum, similarity
from topicpulse.insight.charts import render_chart
from topicpulse.models import StoredPaper, Topic
from topicpulse.sources import arxiv
from topicpulse.topics import query as ql

LATEST_DEFAULT, LATEST_MAX = 5, 20
SIMILAR = 5  # papers /similar and "More like this" show
_COUNT = re.compile(r"[0-9]{1,3}")  # ASCII digits only: "²" and "①" are not counts


@command()
async def momentum_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/momentum [name] — one topic with its chart, or all followed topics ranked."""
    tp = services(context)
    chat_id = chat_id_of(update)
    now = tp.clock()
    text = arg_text(context)
    if not text:
        subs = await tp.store.subscriptions(chat_id)
        if not subs:
            await reply(
                update,
                "Follow a topic first, or ask about one: "
                "<code>/momentum RL for Language Models</code>.",
            )
            return
        ms = await momentum.compute_many(tp.store, [s.topic for s in subs], as_of=now)
        ms.sort(key=momentum.rising_first, reverse=True)
        title = "<b>Your topics, rising first</b> (papers in 4 weeks, change):"
        await reply_lines(update, views.ranked(title, ms))
        return
    topic = await chats.any_topic(tp.store, chat_id, text)
    m = await momentum.compute(tp.store, topic=topic, as_of=now)
    await reply(
        update, formatting.momentum_text(m), views.topic_buttons(topic, tp.settings.public_url)
    )
    png = await offload.run(render_chart, m)
    assert update.effective_message is not None
    await update.effective_message.reply_photo(
        png,
        caption=f"{esc(shorten(topic.name, 100))} — 12 weeks",
        parse_mode=ParseMode.HTML,
        allow_sending_without_reply=True,
    )


@command()
async def trending(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/trending — rising catalogue topics."""
    tp = services(context)
    ranked = await momentum.trending(tp.store, as_of=tp.clock(), limit=10)
    if not ranked:
        await reply(update, "Nothing is trending yet: too few papers stored in the last 4 weeks.")
        return
    await reply(
        update,
        "\n".join(views.ranked("📈 <b>Trending topics</b> (papers in 4 weeks, change):", ranked)),
    )


def parse_latest(args: list[str]) -> tuple[str, int]:
    """``/latest <name> [n]``: the topic text and how many papers (1 … 20)."""
    count = LATEST_DEFAULT
    if len(args) > 1 and _COUNT.fullmatch(args[-1]):
        count = min(max(int(args.pop()), 1), LATEST_MAX)
    return " ".join(args), count


@command()
async def latest(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/latest <name> [n] — newest papers of a topic (n ≤ 20)."""
    tp = services(context)
    words = arg_text(context).split()
    text, count = parse_latest(list(words))
    if not text:
        await reply(update, "Which topic? E.g. <code>/latest Reward Modeling 5</code>.")
        return
    whole = " ".join(words)
    if text != whole:  # a name that ends in a number ("GPT 4") is a name first, then a count
        try:
            topic = await chats.any_topic(tp.store, chat_id_of(update), whole)
        except UserError:
            pass
        else:
            await _send_latest(update, context, topic, LATEST_DEFAULT)
            return
    topic = await chats.any_topic(tp.store, chat_id_of(update), text)
    await _send_latest(update, context, topic, count)


async def _send_latest(
    update: Update, context: ContextTypes.DEFAULT_TYPE, topic: Topic, count: int
) -> None:
    tp = services(context)
    await tp.store.refresh_topic_matches(topic)
    papers = await tp.store.matching_papers(topic_id=topic.id, limit=count)
    if not papers:
        await reply(update, f"No stored paper matches <b>{esc(topic.name)}</b> yet.")
        return
    header = f"🗞 <b>Latest in {esc(shorten(topic.name, 100))}</b>"
    buttons = views.topic_buttons(topic, tp.settings.public_url, ask=False)
    await rating.reply_papers(update, context, papers, header, buttons)


async def latest_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.LatestOf
) -> None:
    """ "Latest" under a catch-up: a topic the chat follows, newest papers first."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    topic = await tp.store.subscribed_topic(chat_id_of(update), button.topic_id)
    if topic is None:
        await query.answer(callbacks.EXPIRED)
        return
    await query.answer()
    await _send_latest(update, context, topic, LATEST_MAX)


@command()
async def search(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/search <query> — best-matching stored papers (BM25)."""
    tp = services(context)
    text = arg_text(context)
    if not text:
        await reply(
            update, 'Search for what? E.g. <code>/search "reward model" AND ti:math</code>.'
        )
        return
    text = chats.check_argument(text, "query")
    try:
        fts = ql.compile_query(text)
    except ql.QueryError as exc:
        raise UserError(f"Could not read that query: {exc}") from None
    papers = await tp.store.matching_papers(fts=fts, limit=10, order="relevance")
    if not papers:
        await reply(update, f"No stored paper matches <code>{esc(text)}</code>.")
        return
    count = await tp.store.count_matches(fts=fts)
    await rating.reply_papers(
        update, context, papers, views.search_header(count, text, len(papers))
    )


async def _typed_paper(
    update: Update, context: ContextTypes.DEFAULT_TYPE, command: str
) -> StoredPaper | None:
    """The stored paper the command's argument names; None when a reply already said why."""
    text = arg_text(context)
    if not text:
        await reply(
            update, f"Which paper? E.g. <code>/{command} 2605.01234</code> or its arXiv link."
        )
        return None
    arxiv_id = arxiv.typed_id(text)
    if arxiv_id is None:
        raise UserError(
            f"“{shorten(text, 60)}” is not an arXiv id or link: try e.g. /{command} 2605.01234"
        )
    tp = services(context)
    found = await tp.store.get_paper(arxiv_id)
    if found is None and tp.lookup is not None:  # not stored yet: ask arXiv for that one
        await chats.lookup_or_explain(tp.lookup, [arxiv_id])
        found = await tp.store.get_paper(arxiv_id)
    if found is None:
        await reply(update, views.paper_unknown(arxiv_id))
    return found


@command()
async def paper(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/paper <arXiv id or link> — one stored paper in full, with ➕ for its topics."""
    found = await _typed_paper(update, context, "paper")
    if found is None:
        return
    store, chat_id = services(context).store, chat_id_of(update)
    followed = (await store.chat_topics_for_papers(chat_id, [found.id])).get(found.id, [])
    others = (await store.paper_topics([found.id], kind="catalogue")).get(found.id, [])
    mine = (await store.ratings_for(chat_id, [found.id])).get(found.id, 0)
    await reply_view(update, views.paper_view(found, followed, others, mine))


@command()
async def similar(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/similar <arXiv id or link> — the stored papers most like that one."""
    found = await _typed_paper(update, context, "similar")
    if found is not None:
        await _send_similar(update, context, found)


async def more_like_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.MoreLike
) -> None:
    """ "More like this" under a /paper card."""
    query = update.callback_query
    assert query is not None
    found = (await services(context).store.papers_by_ids([button.paper_id]) or [None])[0]
    if found is None:
        await query.answer("That paper is no longer stored.")
        return
    await query.answer()
    await _send_similar(update, context, found)


async def _send_similar(
    update: Update, context: ContextTypes.DEFAULT_TYPE, found: StoredPaper
) -> None:
    store = services(context).store
    papers = await similarity.similar_papers(store, found, limit=SIMILAR)
    if not papers:
        await reply(update, "No stored paper is like that one yet.")
        return
    header = f"🔁 <b>Most like</b> “{esc(shorten(found.title, 120))}”"
    await rating.reply_papers(update, context, papers, header)
