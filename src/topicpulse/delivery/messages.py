"""The messages the engine sends, built from outbox rows: instant alerts, digests, a catch-up
for a backlog too big to send paper by paper, spike alerts. Each ``Outgoing`` knows the rows
it settles."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topicpulse import offload
from topicpulse.delivery import buttons, formatting, tastes
from topicpulse.delivery.protocol import Buttons
from topicpulse.insight import momentum
from topicpulse.insight import taste as taste_model
from topicpulse.insight.charts import render_chart
from topicpulse.models import OutboxItem, StoredPaper, Topic
from topicpulse.store import Store

if TYPE_CHECKING:
    from topicpulse.delivery.digests import Settles

CATCH_UP_BEST = 5  # papers a catch-up shows
CATCH_UP_CANDIDATES = 50  # … chosen by a chat's taste among this many on most of its topics
FOLD_PROBE = 40  # papers of a backlog packed first, to learn whether it must fold


@dataclass(slots=True)
class Outgoing:
    """One message to send and the outbox rows it settles."""

    chat_id: int
    outbox_ids: list[int]
    html: str = ""
    photo: bytes | None = None
    preview: bool = False
    folded: bool = False  # a backlog folded into one catch-up (backpressure)
    buttons: Buttons | None = None  # inline buttons: (label, callback data), a row each
    thread_id: int | None = None  # the forum topic it goes to (None: General / no topics)
    chart: int | None = None  # the spike episode whose chart ``photo`` is (uploaded once)
    digest: Settles | None = None  # a digest's message: what it settles besides its rows
    weekly: tuple[str, str] | None = None  # the weekly /foryou's last: (due, next due) it moves

    @property
    def settles_more(self) -> bool:
        """Whether accepting it settles more than its outbox rows (a digest, a weekly)."""
        return self.digest is not None or self.weekly is not None


_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r"<a\s[^>]*?href=\"([^\"]*)\"[^>]*>(.*?)</a>", re.DOTALL)


def _link(match: re.Match[str]) -> str:
    return f"{match.group(2)} ({match.group(1)})" if match.group(1) else match.group(2)


def plain_text(html_text: str) -> str:
    """Fallback for a message Telegram rejected: links written out, other tags dropped,
    entities decoded, cut to fit."""
    text = html.unescape(_TAG.sub("", _LINK.sub(_link, html_text))).strip()
    if formatting.tg_len(text) <= formatting.MAX_MESSAGE:
        return text
    units = text.encode("utf-16-le")[: 2 * (formatting.MAX_MESSAGE - 1)]
    return units.decode("utf-16-le", "ignore").rstrip() + "…"


async def paper_messages(
    store: Store,
    chat_id: int,
    items: Sequence[OutboxItem],
    *,
    fold_after: int | None = None,
) -> list[Outgoing]:
    """Instant alerts for a chat's pending paper rows (digests are assembled by
    ``delivery.digests``). When they would take more than ``fold_after`` messages
    (backpressure), one catch-up instead, which settles every pending paper row of the chat,
    not only ``items``.

    In a forum, each paper goes to the topic its chat's first-followed matching topic was
    followed from (``thread_id``): the papers of each forum topic are packed apart."""
    by_paper = {i.paper_id: i.id for i in items if i.kind == "paper" and i.paper_id is not None}
    if not by_paper:
        return []
    if fold_after is not None and len(by_paper) > FOLD_PROBE:
        # a big backlog: whether its first few already need more than fold_after messages
        # (packing more never takes fewer), before reading every paper of it (issue 25)
        probe = await store.papers_by_ids(list(by_paper)[:FOLD_PROBE])
        if len(formatting.pack_alerts(await _alerts(store, chat_id, probe))) > fold_after:
            catch_up = await catch_up_message(store, chat_id)
            return [catch_up] if catch_up else []
    papers = await store.papers_by_ids(list(by_paper))
    rated = await store.taste(chat_id) is not None  # (one read)
    if rated and (held := await tastes.to_hold_back(store, chat_id, papers)):
        # never dropped: into the quiet list, the outbox rows settled with it
        await store.hold_back_papers(chat_id, [(by_paper[p], p, s) for p, s in held.items()])
        papers = [p for p in papers if p.id not in held]
        if not papers:
            return []
    alerts = await _alerts(store, chat_id, papers)
    threads = await store.subscription_threads(chat_id)
    by_thread: dict[int | None, list[formatting.Alert]] = {}
    for alert in alerts:
        thread = threads.get(alert.topics[0].id) if alert.topics else None
        by_thread.setdefault(thread, []).append(alert)
    packed = [
        (thread, text, paper_ids)
        for thread, group in by_thread.items()
        for text, paper_ids in formatting.pack_alerts(group)
    ]
    if fold_after is not None and len(packed) > fold_after:
        catch_up = await catch_up_message(store, chat_id)
        return [catch_up] if catch_up else []
    rows = buttons.rating_rows([(t, ids) for _, t, ids in packed], numbered=len(alerts) > 1)
    messages = [
        Outgoing(
            chat_id,
            [by_paper[pid] for pid in paper_ids],
            text,
            preview=len(paper_ids) == 1,
            buttons=list(mine),
            thread_id=thread,
        )
        for (thread, text, paper_ids), mine in zip(packed, rows, strict=True)
    ]
    if rated and (waiting := len(await store.waiting_held_back(chat_id))):
        last = messages[-1]
        last.html += f"\n\n{buttons.held_back_line(waiting)}"
        last.buttons = [*(last.buttons or []), buttons.SHOW_HELD]
    return messages


async def _alerts(
    store: Store, chat_id: int, papers: Sequence[StoredPaper]
) -> list[formatting.Alert]:
    """The papers with the chat's topics that match them and every catalogue tag."""
    ids = [p.id for p in papers]
    tags = await store.chat_topics_for_papers(chat_id, ids)
    catalogue = await store.paper_topics(ids, kind="catalogue")  # every tag, followed or not
    return [formatting.Alert(p, tags.get(p.id, []), catalogue.get(p.id, [])) for p in papers]


async def catch_up_message(store: Store, chat_id: int) -> Outgoing | None:
    """One message for the chat's whole backlog of papers, however long: counts per topic, the
    best few papers, and ``/latest`` and a button per topic for the rest.

    The best are the papers that match the most of the chat's topics — the ones most squarely
    on what the chat follows —, newest first among equals (the news a catch-up stands for).
    The backlog is read up to its newest row once, so the counts, the papers shown and the rows
    settled are the same set even while a round queues more (those go out afterwards)."""
    row_ids = await store.pending_paper_rows(chat_id)
    if not row_ids:
        return None
    through = row_ids[-1]
    counts = await store.backlog_topic_counts(chat_id, through=through)
    taste, _ = await taste_model.load(store, chat_id)
    limit = CATCH_UP_CANDIDATES if taste else CATCH_UP_BEST  # the taste picks among more
    best_ids = await store.backlog_best_papers(chat_id, through=through, limit=limit)
    found = {p.id: p for p in await store.papers_by_ids(best_ids)}
    tags = await store.chat_topics_for_papers(chat_id, list(found))
    candidates = [formatting.Alert(found[i], tags.get(i, [])) for i in best_ids if i in found]
    text, rows, thread = await catch_up_view(
        store, chat_id, total=len(row_ids), counts=counts, candidates=candidates, taste=taste
    )
    return Outgoing(chat_id, row_ids, text, folded=True, buttons=rows, thread_id=thread)


async def catch_up_view(
    store: Store,
    chat_id: int,
    *,
    total: int,
    counts: Sequence[tuple[Topic, int]],
    candidates: Sequence[formatting.Alert],
    taste: taste_model.Taste | None,
    period: str | None = None,
) -> tuple[str, Buttons | None, int | None]:
    """A catch-up's text, buttons and forum thread: the best ``CATCH_UP_BEST`` of the
    candidates (best first already; with a taste, its best of them), each with 👍 / 👎, the
    topics' ``/latest`` buttons, and, in a forum, the topic of the chat's topic with the most
    papers (``counts`` ranked, most first)."""
    chosen = list(candidates)
    if taste:
        by_id = {a.paper.id: a for a in chosen}
        ranked = await taste_model.scored(store, taste, [a.paper for a in chosen])
        chosen = [by_id[p.id] for p, _ in ranked]
    chosen = chosen[:CATCH_UP_BEST]
    text, topic_buttons = formatting.catch_up(
        total=total, counts=counts, best=chosen, period=period, ranked=bool(taste)
    )
    shown = [a.paper.id for n, a in enumerate(chosen, 1) if f'{n}. <a href="{a.paper.url}' in text]
    rows: Buttons = [buttons.rating_row(pid, number=n) for n, pid in enumerate(shown, 1)]
    rows += topic_buttons
    thread = (await store.subscription_threads(chat_id)).get(counts[0][0].id) if counts else None
    return text, rows or None, thread


async def spike_message(store: Store, chat_id: int, item: OutboxItem) -> Outgoing | None:
    """The spike alert: the caption and the topic's 12-week chart (None if the episode or its
    topic no longer exists)."""
    episode = await store.episode(item.episode_id or 0)
    topic = await store.topic(episode.topic_id) if episode else None
    if episode is None or topic is None:
        return None
    m = await momentum.compute(store, topic=topic)
    png = await offload.run(render_chart, m)
    return Outgoing(chat_id, [item.id], formatting.spike_caption(m, episode.reason), photo=png)
