"""Message texts in Telegram HTML: alerts, digests, momentum summaries, paper lists.

Every dynamic string goes through ``esc``; every function returns texts that fit Telegram's
limits (``MAX_MESSAGE`` for messages, ``MAX_CAPTION`` for photo captions), splitting long lists
between papers — never inside a tag (``delivery.packing``).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from topicpulse.delivery.packing import MAX_MESSAGE, cut_lines, pack, pack_keyed, tg_len
from topicpulse.insight.ask import Answer
from topicpulse.insight.llm import CITATION
from topicpulse.insight.momentum import Momentum, headline, sparkline
from topicpulse.models import StoredPaper, Topic
from topicpulse.wording import plural

MAX_CAPTION = 1024
MAX_TITLE = 300
MAX_NAME = 80
SHOWN_AUTHORS = 3
SHOWN_TAGS = 8  # a paper's topic tags shown (followed ones first); the rest are counted
MAX_ABSTRACT = 1_200  # characters of an abstract in a card (collapsed: one tap unfolds it)
MAX_LIST_ABSTRACT = 600  # … in a digest or a /latest and /search list, where cards are many
MAX_NOTE = 160  # a journal reference or comment ("Accepted at ICML 2026")
CATCH_UP_TOPICS = 8  # topics a catch-up lists, each with its count, /latest and a button
BUTTON_NAME = 32  # characters of a topic's name on a button


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def authors_line(authors: Sequence[str]) -> str:
    shown = ", ".join(shorten(a, MAX_NAME) for a in authors[:SHOWN_AUTHORS])
    more = len(authors) - SHOWN_AUTHORS
    return esc(shown + (f" +{more}" if more > 0 else "")) if authors else "unknown authors"


def affiliations_line(affiliations: Sequence[str]) -> str:
    """The authors' institutions, as arXiv gives them (often not at all: then nothing)."""
    if not affiliations:
        return ""
    shown = " · ".join(shorten(a, MAX_NAME) for a in affiliations[:SHOWN_AUTHORS])
    more = len(affiliations) - SHOWN_AUTHORS
    return f"🏛 {esc(shown)}" + (f" +{more}" if more > 0 else "")


def topic_tags(topics: Sequence[Topic], others: Sequence[Topic] = ()) -> str:
    """``#Name`` tags: ``topics`` (the ones the chat follows) first and in bold, then ``others``
    (catalogue topics the paper also matches); past ``SHOWN_TAGS`` only counted."""
    return _tags(tuple(topics), tuple(others))


@functools.lru_cache(maxsize=8192)
def _tags(topics: tuple[Topic, ...], others: tuple[Topic, ...]) -> str:
    """``topic_tags``, cached: a round tags its papers with the same few topics for every
    chat that follows them."""
    followed = {t.id for t in topics}
    tags = [*topics, *(t for t in others if t.id not in followed)]
    shown = []
    for t in tags[:SHOWN_TAGS]:
        tag = f"#{esc(shorten(t.name, MAX_NAME))}"
        shown.append(f"<b>{tag}</b>" if t.id in followed and others else tag)
    more = len(tags) - SHOWN_TAGS
    return " · ".join(shown) + (f" +{more}" if more > 0 else "")


@functools.lru_cache(maxsize=8192)
def abstract_quote(abstract: str, limit: int = MAX_ABSTRACT) -> str:
    """The abstract in a collapsed quote (Telegram shows its first lines; a tap unfolds it).
    Shortened, never cut inside an entity: the text is escaped after shortening. (Cached: a
    round sends the same papers to many chats.)"""
    text = shorten(abstract, limit)
    # Escaped, an abstract of quotes and brackets is up to six times as long ("'" → "&#x27;"),
    # and the card would no longer fit a message (measured as sent): shortened further.
    while text and tg_len(esc(text)) > limit * 3 // 2:
        text = shorten(text, len(text) * 9 // 10)
    return f"<blockquote expandable>{esc(text)}</blockquote>" if text else ""


def note_line(paper: StoredPaper) -> str:
    """The journal reference, else the authors' comment ("Accepted at ICML 2026"), in italics."""
    note = paper.journal_ref or paper.comment
    return f"<i>{esc(shorten(note, MAX_NOTE))}</i>" if note and note.strip() else ""


@dataclass(frozen=True, slots=True)
class Alert:
    """A paper for one chat: the chat's topics that matched it (``topics``) and the other
    catalogue topics it matches (``other_tags``)."""

    paper: StoredPaper
    topics: Sequence[Topic]
    other_tags: Sequence[Topic] = ()


def _head(paper: StoredPaper) -> list[str]:
    """A card's first lines: linked bold title, authors, their institutions (if any)."""
    title = esc(shorten(paper.title, MAX_TITLE))
    return [
        f'<b><a href="{esc(paper.url)}">{title}</a></b>',
        authors_line(paper.authors),
        affiliations_line(paper.affiliations),
    ]


def paper_block(alert: Alert, number: int | None = None) -> str:
    """One paper's card: linked bold title (numbered in a grouped alert, like its 👍 / 👎
    row), authors, their institutions (when arXiv gives them), category · date · PDF, the
    journal reference or comment, the abstract (collapsed), and its topic tags (followed
    first)."""
    title, rest = _card(alert.paper)
    lines = [title if number is None else f"{number}. {title}", rest]
    if alert.topics or alert.other_tags:
        lines.append(topic_tags(alert.topics, alert.other_tags))
    return "\n".join(line for line in lines if line)


@functools.lru_cache(maxsize=2048)  # (a day's announcement)
def _card(p: StoredPaper) -> tuple[str, str]:
    """A card's title line and the lines after it up to its tags: the paper's alone, the same
    for every chat a round sends it to (cached)."""
    head = _head(p)
    lines = [
        *head[1:],
        f'{esc(p.primary_category)} · {p.published[:10]} · <a href="{esc(p.pdf_url)}">PDF</a>',
        note_line(p),
        abstract_quote(p.abstract),
    ]
    return head[0], "\n".join(line for line in lines if line)


def paper_card(paper: StoredPaper, followed: Sequence[Topic], others: Sequence[Topic]) -> str:
    """/paper: one paper in full — the card with its abstract unfolded (as long as a message
    allows), every tag, and the abstract, PDF and HTML links."""
    links = (
        f'<a href="{esc(paper.url)}">Abstract</a> · <a href="{esc(paper.pdf_url)}">PDF</a>'
        f' · <a href="{esc(paper.html_url)}">HTML</a>'
    )
    head = [
        *_head(paper),
        f"{esc(paper.primary_category)} · {paper.published[:10]} · v{paper.version}",
        note_line(paper),
    ]
    tail = [topic_tags(followed, others) if followed or others else "", links]
    fixed = tg_len("\n".join(line for line in [*head, *tail] if line)) + 40
    abstract = paper.abstract
    while abstract and tg_len(f"<blockquote>{esc(abstract)}</blockquote>") > MAX_MESSAGE - fixed:
        abstract = shorten(abstract, len(abstract) * 9 // 10)
    quote = f"<blockquote>{esc(abstract)}</blockquote>" if abstract else ""
    return "\n".join(line for line in [*head, quote, *tail] if line)


def pack_alerts(alerts: Sequence[Alert], *, most: int | None = None) -> list[tuple[str, list[int]]]:
    """Instant alerts: what one round found for a chat, in as few messages as fit, each with
    the ids of the papers it carries (with ``most``, written only until they fill more than
    that many messages: ``pack_keyed``)."""
    if len(alerts) == 1:
        return pack_keyed([(paper_block(alerts[0]), alerts[0].paper.id)])
    header = f"🆕 <b>{plural(len(alerts), 'new paper')}</b>"
    numbered = ((paper_block(a, n), a.paper.id) for n, a in enumerate(alerts, start=1))
    return pack_keyed(numbered, header=header, most=most)


def alert_messages(alerts: Sequence[Alert]) -> list[str]:
    return [text for text, _ in pack_alerts(alerts)]


DIGEST_SHOWN = 5  # papers of a topic a digest in the reader's order shows in full
FOLD_LINES = 12  # … the rest, folded, in quotes of at most this many title lines


def pack_digest(
    alerts: Sequence[Alert],
    *,
    period: str,
    scores: dict[int, float] | None = None,
    most: int | None = None,
) -> list[tuple[str, list[int]]]:
    """A daily/weekly digest grouped by topic ("12 new in RL for Language Models"); each paper
    once, under the first of the chat's topics that matched it, numbered (like its 👍 / 👎
    row: the papers' ids come back in number order). With the taste's ``scores``, each topic's
    papers are in the reader's order, the best ``DIGEST_SHOWN`` in full and the rest folded
    behind "N more" (a collapsed quote of titles). Empty → no messages. With ``most``, the
    entries are written only until they fill more than that many messages (``pack_keyed``)."""
    if not alerts:
        return []
    groups: dict[str, list[Alert]] = {}
    for alert in alerts:
        name = alert.topics[0].name if alert.topics else "Other"
        groups.setdefault(name, []).append(alert)
    total = plural(len(alerts), "new paper")
    order = " · in your order, best first" if scores else ""
    head = f"📬 <b>Your {esc(period)} digest</b>: {total}{order}"
    return pack_keyed(_digest_blocks(head, groups, scores), separator="\n", most=most)


def _digest_blocks(
    head: str, groups: dict[str, list[Alert]], scores: dict[int, float] | None
) -> Iterator[tuple[str, int | Sequence[int] | None]]:
    """The digest's blocks, written as they are packed."""
    yield head, None
    number = 0
    for name, members in groups.items():
        if scores:
            members = sorted(members, key=lambda a: -scores.get(a.paper.id, 0.0))
        shown = members[:DIGEST_SHOWN] if scores else members
        heading = f"\n<b>{len(members)} new in {esc(shorten(name, MAX_NAME))}</b>"
        for n, alert in enumerate(shown):
            number += 1
            line = digest_line(alert, number)
            # the heading travels with its first paper: never left alone at the end of a message
            yield (f"{heading}\n{line}" if n == 0 else line), alert.paper.id
        folded = members[len(shown) :]
        for start in range(0, len(folded), FOLD_LINES):
            part = folded[start : start + FOLD_LINES]
            lines = [f"{len(folded)} more:"] if start == 0 else []
            for alert in part:
                number += 1
                lines.append(fold_line(alert, number))
            text = "\n".join(lines)
            yield f"<blockquote expandable>{text}</blockquote>", [a.paper.id for a in part]


def fold_line(alert: Alert, number: int) -> str:
    """A folded digest entry: number and linked title."""
    p = alert.paper
    return f'{number}. <a href="{esc(p.url)}">{esc(shorten(p.title, 120))}</a>'


def digest_messages(alerts: Sequence[Alert], *, period: str) -> list[str]:
    return [text for text, _ in pack_digest(alerts, period=period)]


def digest_line(alert: Alert, number: int | None = None) -> str:
    return f"{'•' if number is None else f'{number}.'} {_digest_entry(alert.paper)}"


@functools.lru_cache(maxsize=2048)
def _digest_entry(p: StoredPaper) -> str:
    """A digest line after its number: the paper's alone (cached, as ``_card``)."""
    first = (
        shorten(p.authors[0], MAX_NAME) + (" et al." if len(p.authors) > 1 else "")
        if p.authors
        else ""
    )
    line = (
        f'<a href="{esc(p.url)}">{esc(shorten(p.title, MAX_TITLE))}</a>'
        f" — {esc(first)} · {esc(p.primary_category)}"
    )
    quote = abstract_quote(p.abstract, MAX_LIST_ABSTRACT)
    return f"{line}\n{quote}" if quote else line


def catch_up(
    *,
    total: int,
    counts: Sequence[tuple[Topic, int]],
    best: Sequence[Alert],
    period: str | None = None,
    ranked: bool = False,
) -> tuple[str, list[tuple[str, str]]]:
    """One message for a backlog too big to send paper by paper: ``total`` new papers, how
    many per topic (``counts``, most first), the ``best`` few (ranked by the caller), and the
    way to the rest — ``/latest <topic>`` written out, and a button per topic (callback data
    ``l:<topic id>``). Returns the text and the buttons as (label, callback data). With a
    digest ``period`` ("daily", "weekly"), it is that digest, for a backlog too big for two;
    ``ranked``: the best are in the reader's order (their taste), numbered either way.

    Always one message: the topics after ``CATCH_UP_TOPICS`` are only counted, and papers,
    then topics, are left out for as long as the text would not fit."""
    shown = list(counts[:CATCH_UP_TOPICS])
    papers = list(best)
    while True:
        text = _catch_up_text(total, shown, len(counts) - len(shown), papers, period, ranked)
        if tg_len(text) <= MAX_MESSAGE:
            break
        if len(papers) > 1:
            papers.pop()
        elif len(shown) > 1:
            shown.pop()
        else:  # (cannot happen: every piece is bounded far below the limit)
            text = cut_lines(text, MAX_MESSAGE)
            break
    buttons = [(f"🗞 {shorten(t.name, BUTTON_NAME)}", f"l:{t.id}") for t, _ in shown]
    return text, buttons


def _catch_up_text(
    total: int,
    shown: Sequence[tuple[Topic, int]],
    hidden: int,
    papers: Sequence[Alert],
    period: str | None = None,
    ranked: bool = False,
) -> str:
    if period:
        head = f"📬 <b>Your {esc(period)} digest: {plural(total, 'new paper')}</b>"
        lines = [f"{head} — the best first, the rest a tap away."]
    else:
        lines = [f"📬 <b>Catch-up: {plural(total, 'new paper')}</b> — too many to send one by one."]
    for topic, count in shown:
        line = f"• <b>{esc(shorten(topic.name, MAX_NAME))}</b>: {count}"
        if len(topic.name) <= MAX_NAME:  # a longer name makes no command worth typing
            line += f" · <code>/latest {esc(topic.name)}</code>"
        lines.append(line)
    if hidden:
        lines.append(f"• and {plural(hidden, 'more topic')} (/list)")
    if papers:
        order = "in your order" if ranked else "on most of your topics, newest first"
        lines += ["", f"<b>Best {len(papers)}</b> — {order}:"]
        lines += [digest_line(a, n) for n, a in enumerate(papers, start=1)]
    if shown:
        lines += ["", "Tap a topic for its latest papers."]
    return "\n".join(lines)


def momentum_text(m: Momentum, *, name: str | None = None) -> str:
    title = esc(shorten(name or m.topic or m.query, MAX_NAME))
    spark = sparkline([c for _, c in m.weekly])
    total = plural(m.total, "paper")
    return f"📊 <b>{title}</b>\n{esc(headline(m))}\n{total} in all · 12 weeks: {spark}"


def momentum_line(m: Momentum) -> str:
    """One ranked line: name, 4-week count and change, sparkline."""
    change = ("new" if m.last_4w else "—") if m.change_pct is None else f"{m.change_pct:+.0f}%"
    spark = sparkline([c for _, c in m.weekly])
    return f"{spark} <b>{esc(shorten(m.topic or m.query, MAX_NAME))}</b>: {m.last_4w} ({change})"


def spike_caption(m: Momentum, reason: str) -> str:
    # Bounded pieces (name ≤ 80, headline ≈ 110, reason ≤ 200) keep this far under MAX_CAPTION.
    return (
        f"📈 <b>{esc(shorten(m.topic or m.query, MAX_NAME))} is spiking</b>\n"
        f"{esc(headline(m))}\n<i>{esc(shorten(reason, 200))}</i>"
    )


def paper_list(
    papers: Sequence[StoredPaper], *, header: str, tags: dict[int, list[Topic]] | None = None
) -> list[str]:
    """A header and numbered compact paper entries (for /latest and /search)."""
    return [text for text, _ in paper_list_keyed(papers, header=header, tags=tags)]


def paper_list_keyed(
    papers: Sequence[StoredPaper], *, header: str, tags: dict[int, list[Topic]] | None = None
) -> list[tuple[str, list[int]]]:
    """``paper_list``, each message with the ids of the papers it lists (for their buttons)."""
    if not papers:
        return [(header, [])]
    blocks: list[tuple[str, int | None]] = [(header, None)]
    for n, p in enumerate(papers, start=1):
        line = (
            f'{n}. <a href="{esc(p.url)}">{esc(shorten(p.title, MAX_TITLE))}</a>\n'
            f"   {authors_line(p.authors)} · {esc(p.primary_category)} · {p.published[:10]}"
        )
        if quote := abstract_quote(p.abstract, MAX_LIST_ABSTRACT):
            line += f"\n{quote}"
        if tags and tags.get(p.id):
            line += f"\n   {topic_tags(tags[p.id])}"
        blocks.append((line, p.id))
    return pack_keyed(blocks, separator="\n")


def _cite(match: re.Match[str], answer: Answer) -> str:
    n = int(match.group(1))
    paper = answer.passages[n - 1].paper
    return f'<a href="{esc(paper.url)}">[{n}]</a>'


def answer_messages(answer: Answer, generated: str | None = None) -> list[str]:
    """/ask's reply: where the passages come from, an optional generated answer (its [n]
    linked to the papers), then each passage quoted with its paper's linked title and date."""
    scope = f"on {esc(shorten(answer.topic.name, MAX_NAME))}" if answer.topic else "stored"
    header = (
        f"💬 <b>From {plural(answer.papers_in_scope, 'paper')} {scope}:</b>\n"
        f"<i>{esc(shorten(answer.question, 200))}</i>"
    )
    if not answer.passages:
        return [f"{header}\n\nNo stored paper speaks to that. Try other words."]
    blocks = [header]
    if generated:
        linked = CITATION.sub(lambda m: _cite(m, answer), esc(generated))
        blocks.append(f"{linked}\n<i>Written by a language model from the passages below.</i>")
    for n, passage in enumerate(answer.passages, 1):
        paper = passage.paper
        blocks.append(
            f"{n}. “{esc(passage.text)}”\n"
            f'   — <a href="{esc(paper.url)}">{esc(shorten(paper.title, 150))}</a>,'
            f" {paper.published[:10]}"
        )
    return pack(blocks)
