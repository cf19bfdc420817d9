"""The messages the engine sends and their parts: ``Outgoing`` (one message and what it
settles), the catch-up's view for a backlog too big to send paper by paper, spike alerts, and
the plain-text fallback. Instant alerts and digests are assembled from the matches
(``delivery.alerts``, ``delivery.digests``)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topicpulse import offload
from topicpulse.delivery import buttons, formatting
from topicpulse.delivery.protocol import Buttons
from topicpulse.insight import momentum
from topicpulse.insight import taste as taste_model
from topicpulse.insight.charts import render_chart
from topicpulse.models import OutboxItem, Topic
from topicpulse.store import Store

if TYPE_CHECKING:
    from topicpulse.delivery.digests import Settles

CATCH_UP_BEST = 5  # papers a catch-up shows
CATCH_UP_CANDIDATES = 50  # … chosen by a chat's taste among this many on most of its topics
FOLD_PROBES = (12, 40)  # papers of a backlog packed first, fewest first: must it fold?


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
    def settles_papers(self) -> int:
        """Outbox rows and papers from the matches it settles."""
        return len(self.outbox_ids) + (len(self.digest.paper_ids) if self.digest else 0)

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


async def catch_up_view(
    store: Store,
    *,
    total: int,
    counts: Sequence[tuple[Topic, int]],
    candidates: Sequence[formatting.Alert],
    taste: taste_model.Taste | None,
    threads: dict[int, int | None],
    period: str | None = None,
) -> tuple[str, Buttons | None, int | None]:
    """A catch-up's text, buttons and forum thread: the best ``CATCH_UP_BEST`` of the
    candidates (best first already; with a taste, its best of them), each with 👍 / 👎, the
    topics' ``/latest`` buttons, and, in a forum, the topic of the chat's topic with the most
    papers (``counts`` ranked, most first; ``threads``: the chat's topics' forum topics)."""
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
    thread = threads.get(counts[0][0].id) if counts else None
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
