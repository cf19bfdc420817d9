"""What the bot shows: pure functions from engine results to Telegram HTML and buttons.

A view is text plus ``Keyboard`` rows of (label, callback data) pairs: no python-telegram-bot
objects, so every view is testable on its own. Everything user-supplied is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from topicpulse.bot import callbacks
from topicpulse.delivery import buttons, chats, formatting, refine, tastes, weekly
from topicpulse.delivery.formatting import esc, shorten
from topicpulse.insight import taste
from topicpulse.insight.momentum import Momentum
from topicpulse.models import Chat, StoredPaper, Topic, parse_iso
from topicpulse.store import Refinement
from topicpulse.wording import plural

TOPICS_PER_PAGE = 8
Keyboard = list[list[tuple[str, str]]]  # rows of (label, callback data)

HELP = (
    "<b>topicpulse</b> follows research topics on arXiv for you: each new paper on a topic you "
    "follow arrives once — instantly or in a daily/weekly digest — and you can ask how a topic "
    "is moving.\n\n"
    "Try:\n"
    "• <code>/follow RL for Language Models</code>\n"
    "• <code>/follow grpo AND (math OR reasoning)</code>\n"
    "• <code>/momentum Reward Modeling</code>\n"
    "• <code>/ask RL for Language Models: how do people stop reward hacking?</code>\n\n"
    '<b>Queries</b>: words, "phrases", AND, OR, NOT, (…), prefix*, and fields '
    'ti: abs: au: cat: — e.g. <code>ti:"reward model" NOT cat:cs.RO</code>\n\n'
    "<b>Commands</b>: /topics /follow /unfollow /list /momentum /trending /latest /search /paper "
    "/similar /taste /foryou "
    "/ask /digest /timezone /pause /resume /spikes /settings"
)


@dataclass(slots=True)
class View:
    text: str
    keyboard: Keyboard = field(default_factory=list)


def button(label: str, target: callbacks.Button) -> tuple[str, str]:
    return label, callbacks.encode(target)


# ---------------------------------------------------------------------------------- follow
def follow_result(result: chats.FollowResult) -> View:
    t = result.topic
    verb = "Now following" if result.added else "Already following"
    lines = [f"✅ {verb} <b>{esc(shorten(t.name, 100))}</b>"]
    if result.rule is not None:
        words = ", ".join(result.rule.words)
        lines.append(f"Papers that use at least {result.rule.at_least} of: <i>{esc(words)}</i>")
    elif t.is_custom and t.query != t.name:
        lines.append(f"Query: <code>{esc(t.query)}</code>")
    if result.last_4w == 0:
        lines.append("No stored paper matched in the last 4 weeks — is the query too narrow?")
    else:
        lines.append(f"{plural(result.last_4w, 'paper')} in the last 4 weeks. Latest:")
        lines += [
            f'• <a href="{esc(p.url)}">{esc(shorten(p.title, 150))}</a> ({p.published[:10]})'
            for p in result.latest
        ]
    lines.append("New papers will reach this chat once each.")
    undo = [[button("↩️ Undo", callbacks.Undo(t.id))]]
    return View("\n".join(lines), undo if result.added else [])  # nothing to undo otherwise


def confirm_shared(query: str, code: str) -> View:
    """/start q_<code>: a web page's follow link, shown before anything is followed."""
    return View(
        f"Follow this query from a topicpulse page?\n<code>{esc(query)}</code>\n"
        "Nothing is followed until you tap the button.",
        [[button("✅ Follow this query", callbacks.FollowShared(code))]],
    )


def followed_list(chat: Chat, rows: Sequence[tuple[Topic, Momentum]]) -> tuple[list[str], Keyboard]:
    """/list: a line per followed topic (sparkline, 4-week count, change) and ✖ buttons."""
    if not rows:
        return [
            "This chat follows no topics yet. Try /topics or "
            "<code>/follow RL for Language Models</code>."
        ], []
    lines = [
        f"<b>Following {plural(len(rows), 'topic')}</b> · "
        f"{esc(chats.describe_schedule(chat))}{' · ⏸ paused' if chat.paused else ''}"
    ]
    lines += [formatting.momentum_line(m) for _, m in rows]
    keyboard = [
        [button(f"✖ {shorten(topic.name, 40)}", callbacks.UnfollowFromList(topic.id))]
        for topic, _ in rows
    ]
    return lines, keyboard


def unfollowed(name: str, removed: bool) -> str:
    return f"{'Unfollowed' if removed else 'Not following'} <b>{esc(shorten(name, 100))}</b>."


# ---------------------------------------------------------------------------------- catalogue
def filter_catalogue(topics: Sequence[Topic], words: str) -> list[Topic]:
    needles = words.casefold().split()
    return [
        t
        for t in topics
        if all(n in f"{t.name} {t.description} {t.slug}".casefold() for n in needles)
    ]


def topics_page(topics: Sequence[Topic], words: str, page: int) -> View:
    """One page of the catalogue (already filtered by ``words``), ➕ per topic, ◀ / ▶."""
    pages = max(1, -(-len(topics) // TOPICS_PER_PAGE))
    page = min(max(page, 0), pages - 1)
    shown = topics[page * TOPICS_PER_PAGE : (page + 1) * TOPICS_PER_PAGE]
    if not shown:
        return View(f"No catalogue topic matches “{esc(words)}”. Try /topics without words.")
    title = f"<b>Topics</b> matching “{esc(words)}”" if words else "<b>Topics</b>"
    lines = [f"{title} (page {page + 1}/{pages}) — tap to follow:"]
    lines += [f"• <b>{esc(t.name)}</b> — {esc(t.description)}" for t in shown]
    keyboard: Keyboard = [[button(f"➕ {t.name}", callbacks.FollowTopic(t.id))] for t in shown]
    nav = []
    if page > 0:
        nav.append(button("◀ Prev", callbacks.TopicsPage(page - 1, words)))
    if page < pages - 1:
        nav.append(button("Next ▶", callbacks.TopicsPage(page + 1, words)))
    if nav:
        keyboard.append(nav)
    return View("\n".join(lines), keyboard)


# ---------------------------------------------------------------------------------- reading
def ranked(title: str, moments: Sequence[Momentum]) -> list[str]:
    return [title, *(formatting.momentum_line(m) for m in moments)]


PAPER_FOLLOW_BUTTONS = 4


def paper_view(
    paper: StoredPaper, followed: Sequence[Topic], others: Sequence[Topic], rating: int = 0
) -> View:
    """/paper: the full card, 👍 / 👎, "More like this", and a ➕ button for each of its
    catalogue topics not followed."""
    mine = {t.id for t in followed}
    new = [t for t in others if t.id not in mine][:PAPER_FOLLOW_BUTTONS]
    name = formatting.BUTTON_NAME
    keyboard = [
        buttons.rating_row(paper.id, rating),
        [button("🔁 More like this", callbacks.MoreLike(paper.id))],
    ]
    keyboard += [
        [button(f"➕ Follow {shorten(t.name, name)}", callbacks.FollowTopic(t.id))] for t in new
    ]
    return View(formatting.paper_card(paper, followed, others), keyboard)


def paper_unknown(arxiv_id: str) -> str:
    return (
        f"I have no paper {esc(arxiv_id)}: I keep the papers of this bot's arXiv categories from"
        f' the last weeks. On arXiv: <a href="https://arxiv.org/abs/{esc(arxiv_id)}">'
        f"arxiv.org/abs/{esc(arxiv_id)}</a>"
    )


def search_header(count: int, query: str, shown: int) -> str:
    return f"🔎 <b>{plural(count, 'paper')}</b> match <code>{esc(query)}</code>; best {shown}:"


# ---------------------------------------------------------------------------------- settings
def settings(chat: Chat, follows: int) -> str:
    next_digest = ""
    if chat.next_digest_at:  # in the chat's own time, which is what it chose
        due = parse_iso(chat.next_digest_at).astimezone(ZoneInfo(chat.timezone))
        next_digest = f"\nNext digest: {due:%a %d %b %H:%M} ({esc(chat.timezone)})"
    return (
        "<b>Settings</b>\n"
        f"Delivery: {esc(chats.describe_schedule(chat))}{next_digest}\n"
        f"Time zone: {esc(chat.timezone)}\n"
        f"Alerts: {'paused' if chat.paused else 'on'}"
        f" · Spike alerts: {'on' if chat.spikes else 'off'}\n"
        f"Topics followed: {follows}/{chats.MAX_FOLLOWS}"
    )


def stats(
    *,
    papers_stored: int,
    topics: Sequence[Topic],
    chat_counts: dict[str, int],
    outbox: dict[str, int],
    last_poll: dict[str, Any] | None,
    errors: int,
    unparsed: tuple[int, int],
    alerts_due: int = 0,
) -> str:
    """The administrators' figures. ``unparsed``: the topics whose stored query no longer
    parses, (matched from their compiled form, skipped) in the last matching round;
    ``alerts_due``: instant chats a round marked whose alerts have not gone yet."""
    poll_line = "never"
    if last_poll:
        poll_line = (
            f"{last_poll['started_at']} ({'ok' if last_poll['ok'] else 'failed'}, "
            f"{last_poll['new']} new)"
        )
    return (
        "<b>topicpulse stats</b>\n"
        f"Papers: {papers_stored}\nTopics: {len(topics)} "
        f"({sum(t.is_custom for t in topics)} custom)\n"
        f"Chats: {chat_counts['active']} active, {chat_counts['inactive']} inactive · "
        f"{chat_counts['subscriptions']} subscriptions\n"
        f"Queue: {outbox.get('pending', 0)} pending, {outbox.get('sent', 0)} sent, "
        f"{outbox.get('dropped', 0)} dropped · {alerts_due} chats owed alerts\n"
        f"Last poll: {esc(poll_line)}\nIngest errors (24 h): {errors}\n"
        f"Stale queries (last round): {unparsed[0]} matched as compiled, {unparsed[1]} skipped"
    )


ASK_PROMPT = "❓ Ask about "  # the first words of the prompt a question replies to


def ask_prompt(topic: Topic) -> str:
    """The message a question about ``topic`` replies to (its first line names the topic)."""
    return (
        f"{ASK_PROMPT}<b>{esc(topic.name)}</b>\n"
        "Reply to this message with your question, e.g. <i>how do people evaluate this?</i> "
        "I quote the abstracts of its stored papers that answer it best."
    )


def topic_buttons(topic: Topic, public_url: str | None, *, ask: bool = True) -> Keyboard:
    """Under /momentum (and /latest): ❓ Ask about this topic, and 🌐 Open topic page (a link)
    when the pages have a public address and the topic a page (a catalogue topic)."""
    rows: Keyboard = (
        [[button("❓ Ask about this topic", callbacks.AskAbout(topic.id))]] if ask else []
    )
    if public_url and topic.slug:
        rows.append([("🌐 Open topic page", f"{public_url.rstrip('/')}/topics/{topic.slug}")])
    return rows


# ---------------------------------------------------------------------------------- taste
def rating_rows(
    paper_ids: Sequence[int], ratings: dict[int, int], numbers: dict[int, int] | None = None
) -> Keyboard:
    """A compact 👍 / 👎 row per paper (numbered like its entry), the chat's ratings ticked."""
    return [
        buttons.rating_row(pid, ratings.get(pid, 0), (numbers or {}).get(pid)) for pid in paper_ids
    ]


def relabel(keyboard: Keyboard, ratings: dict[int, int]) -> Keyboard:
    """The same keyboard with each 👍 / 👎 ticked as the chat rates its paper now."""
    rows: Keyboard = []
    for row in keyboard:
        new = []
        for label, data in row:
            target = callbacks.decode(data)
            if isinstance(target, callbacks.Rate):
                base = label.removesuffix(buttons.RATED)
                on = ratings.get(target.paper_id, 0) == target.value
                label = base + (buttons.RATED if on else "")
            new.append((label, data))
        rows.append(new)
    return rows


def rated(value: int) -> str:
    """The answer to a tap on 👍 / 👎."""
    if value > 0:
        return "👍 Noted — more like this. Tap again to undo."
    if value < 0:
        return "👎 Noted — fewer like this. Tap again to undo."
    return "Rating removed."


TASTE_HELP = (
    "<b>Teach it</b>: tap 👍 / 👎 under any paper (a second tap undoes); send "
    "<code>/taste 2605.01234 2604.00042</code> with papers you like; or send a BibTeX or RIS "
    "export (Zotero: File → Export Library) as a file with the caption <code>/taste</code>.\n"
    "<code>/taste off</code> stops holding papers back; <code>/taste on</code> starts again."
)


LeftOut = Sequence[tuple[Refinement, str]]  # a word left out, and the topic's name


def taste_summary(summary: tastes.Summary, left: LeftOut = (), weekly: str = "") -> View:
    """/taste: what the bot has learned from this chat's ratings, how to teach it, the words it
    leaves out of topics (each with ✖ to put it back) and the weekly /foryou."""
    extra = [f"✂️ Left out of <b>{esc(shorten(name, 60))}</b>: {esc(x.term)}" for x, name in left]
    extra += [esc(weekly)] if weekly else []
    keyboard: Keyboard = [
        [button(f"✖ {shorten(x.term, 20)} ({shorten(name, 30)})", callbacks.PutBackListed(x.id))]
        for x, name in left
    ]
    more = "\n".join(extra) + "\n\n" if extra else ""
    if not summary.up and not summary.down:
        return View(
            "🎯 <b>Your taste</b>: nothing learned yet. With a few ratings, digests list papers "
            "in your order (best first) and instant alerts hold back what you would not want "
            f"(after {taste.MIN_RATED} ratings, {taste.MIN_UP}+ 👍 and {taste.MIN_DOWN}+ 👎)."
            f"\n\n{more}{TASTE_HELP}",
            keyboard,
        )
    lines = [f"🎯 <b>Your taste</b>: {summary.up} 👍 · {summary.down} 👎"]
    if summary.liked_words:
        lines.append(f"More of: <i>{esc(', '.join(summary.liked_words))}</i>")
    if summary.disliked_words:
        lines.append(f"Less of: <i>{esc(', '.join(summary.disliked_words))}</i>")
    if summary.training:
        lines.append("(learning from your latest ratings…)")
    if summary.taste is None and not summary.training:
        lines.append("A 👍 or two more and digests come in your order.")
    enough = taste.enough_ratings(summary.up, summary.down)
    if not summary.hold_back:
        lines.append("Holding back: off (/taste on)")
    elif enough:
        lines.append("Holding back: on — alerts keep unlikely papers in a quiet list.")
    else:
        lines.append(
            f"Holding back starts after {taste.MIN_RATED} ratings, with {taste.MIN_UP}+ 👍 and"
            f" {taste.MIN_DOWN}+ 👎."
        )
    return View("\n".join(lines) + f"\n\n{more}{TASTE_HELP}", keyboard)


def weekly_set(chat: Chat, due: datetime | None, liked: int) -> str:
    """The answer to /foryou weekly or /foryou off."""
    if due is None:
        return "Weekly /foryou is off. /foryou still lists them whenever you ask."
    first = due.astimezone(ZoneInfo(chat.timezone))
    text = (
        f"✨ Weekly /foryou is on: {esc(weekly.when(chat))}, the week's papers your taste "
        f"rates highest outside your topics (first: {first:%a %d %b %H:%M}). "
        "<code>/foryou off</code> stops it."
    )
    if liked < weekly.MIN_LIKED:
        text += f" It starts once your taste has {weekly.MIN_LIKED} 👍 (now {liked})."
    return text


def imported(result: tastes.ImportResult) -> str:
    parts = [f"👍 Imported {plural(result.added, 'liked paper')}"]
    if result.by_text:
        parts.append(f"{result.by_text} not stored here, learned from their abstracts")
    if result.known:
        parts.append(f"{result.known} already rated (kept)")
    if result.skipped:
        parts.append(f"{result.skipped} skipped (no arXiv id, no abstract)")
    return " · ".join(parts) + ". /taste shows what I learned."


# ---------------------------------------------------------------------------------- refining
def refine_offer(offer: refine.Offer) -> View:
    """After a 👎: the offer to leave a word out of one of the chat's topics."""
    return View(
        f"✂️ Leave out papers about <b>{esc(offer.term)}</b> from "
        f"<b>{esc(shorten(offer.topic, 80))}</b>?\n"
        f"{offer.disliked} of your 👎 there mention it, none of your 👍.",
        [
            [
                button(f"✂️ Leave out {shorten(offer.term, 30)}", callbacks.LeaveOut(offer.id)),
                button("No thanks", callbacks.NoThanks(offer.id)),
            ]
        ],
    )


def left_out(decided: refine.Decided) -> View:
    """An offer accepted, with ↩️ Undo."""
    lines = [
        f"✂️ Left out papers about <b>{esc(decided.term)}</b> from "
        f"<b>{esc(shorten(decided.topic, 80))}</b>."
    ]
    if decided.query is not None:
        lines.append(f"Now following <code>{esc(shorten(decided.query, 200))}</code>.")
    else:
        lines.append("Papers another of your topics matches still arrive.")
    lines.append("/taste lists what you left out.")
    return View("\n".join(lines), [[button("↩️ Undo", callbacks.PutBack(decided.id))]])


def put_back(decided: refine.Decided) -> View:
    """A left-out word put back."""
    if decided.query is not None:
        return View(
            f"↩️ Papers about <b>{esc(decided.term)}</b> are back: following "
            f"<code>{esc(shorten(decided.query, 200))}</code> again."
        )
    return View(
        f"↩️ Papers about <b>{esc(decided.term)}</b> are back in "
        f"<b>{esc(shorten(decided.topic, 80))}</b>."
    )


def declined(offer: Refinement) -> View:
    return View(f"OK — I won't offer to leave out <b>{esc(offer.term)}</b> from that topic again.")
