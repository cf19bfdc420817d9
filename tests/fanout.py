"""Test and benchmark helpers: fill a store with chats, subscriptions and papers so that the
real matching owes a known set of alerts, and read back what a fake Bot API delivered."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from topicpulse.models import Paper, iso
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics
from topicpulse.topics.matching import match_new_papers

ARXIV_LINK = re.compile(r"arxiv\.org/abs/([\w./-]+?)[\"<\s)]")


def synthetic_paper(n: int, *, keyword: str, hours_ago: float = 2.0) -> Paper:
    stamp = iso(datetime.now(UTC) - timedelta(hours=hours_ago))
    return Paper(
        arxiv_id=f"2611.{n:05d}",
        version=1,
        title=f"A study of {keyword} for language models, part {n}",
        abstract=f"We study {keyword} in depth. Results on many benchmarks. (#{n})",
        authors=("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra"),
        primary_category="cs.CL",
        categories=("cs.CL", "cs.LG"),
        published=stamp,
        updated=stamp,
    )


@dataclass
class FanOut:
    """What a prepared store owes: chat → the arXiv ids it must receive, each exactly once."""

    expected: dict[int, set[str]] = field(default_factory=dict)
    keyword: dict[int, str] = field(default_factory=dict)  # chat → the topic it follows

    @property
    def alerts(self) -> int:
        return sum(len(v) for v in self.expected.values())


async def fill_outbox(
    store: Store,
    chat_ids: Sequence[int],
    *,
    alerts: int,
    chats_per_topic: int = 10,
    extra: dict[int, int] | None = None,
    first_paper: int = 1,
) -> FanOut:
    """Each chat follows one custom topic (``kwNNNNN``; ``chats_per_topic`` chats per topic);
    papers are stored and matched (``match_new_papers``) so that ``alerts`` alerts are owed in
    all (every chat that owes one marked by the round). ``extra`` gives chosen chats a
    private topic with that many more papers (a backlog). Chats with a negative id are groups."""
    n_topics = math.ceil(len(chat_ids) / chats_per_topic)
    members: dict[str, list[int]] = {f"kw{t:05d}": [] for t in range(n_topics)}
    names = list(members)
    for index, chat_id in enumerate(chat_ids):
        members[names[index % n_topics]].append(chat_id)
    per_chat = alerts // max(1, len(chat_ids))
    papers_for = dict.fromkeys(names, per_chat)
    owed = alerts - per_chat * len(chat_ids)
    for name in names:
        if owed <= 0:
            break
        papers_for[name] += 1
        owed -= len(members[name])
    for chat_id, more in (extra or {}).items():
        name = f"solo{abs(chat_id)}"
        members[name] = [chat_id]
        papers_for[name] = more
    fan = FanOut({c: set() for c in chat_ids})
    for name, chat_list in members.items():
        topic = await topics.custom_topic(store, name)
        for chat_id in chat_list:
            fan.keyword.setdefault(chat_id, name)
            await store.ensure_chat(chat_id, type="supergroup" if chat_id < 0 else "private")
            await store.subscribe(chat_id, topic.id)
    papers: list[Paper] = []
    n = first_paper - 1
    for name, chat_list in members.items():
        for _ in range(papers_for[name]):
            n += 1
            paper = synthetic_paper(n, keyword=name)
            papers.append(paper)
            for chat_id in chat_list:
                fan.expected[chat_id].add(paper.arxiv_id)
    await store.upsert_papers(papers)
    result = await match_new_papers(store)
    owing = {c for c, ids in fan.expected.items() if ids}
    assert result.chats_marked >= len(owing), (result.chats_marked, len(owing))
    assert set(await store.instant_chats_due(limit=10**9)) == owing
    return fan


async def prepare_fanout(
    db: Path, *, chats: int, alerts: int, chats_per_topic: int = 10, first_chat: int = 1
) -> FanOut:
    """A new store at ``db`` owing ``alerts`` alerts to ``chats`` private chats."""
    store = await Store.open(db)
    try:
        chat_ids = list(range(first_chat, first_chat + chats))
        return await fill_outbox(store, chat_ids, alerts=alerts, chats_per_topic=chats_per_topic)
    finally:
        await store.close()


def delivered(
    sent: Iterable[object], chat_ids: Iterable[int] | None = None
) -> dict[int, list[str]]:
    """chat → arXiv ids in the messages a fake Bot API accepted, repeats included."""
    wanted = None if chat_ids is None else set(chat_ids)
    found: dict[int, list[str]] = {}
    for message in sent:
        chat_id = message.chat_id  # type: ignore[attr-defined]
        text = message.text  # type: ignore[attr-defined]
        if text and (wanted is None or chat_id in wanted):
            found.setdefault(chat_id, []).extend(ARXIV_LINK.findall(text + " "))
    return found


def lost_and_duplicated(fan: FanOut, sent: Iterable[object]) -> tuple[int, int]:
    """(alerts never delivered, alerts delivered more than once) for a prepared fan-out."""
    got = delivered(sent, fan.expected)
    lost = sum(len(ids - set(got.get(c, []))) for c, ids in fan.expected.items())
    dupes = sum(len(v) - len(set(v)) for v in got.values())
    return lost, dupes
