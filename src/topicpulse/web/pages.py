"""What each web page shows, as plain data: the same engine calls the chat makes (momentum,
the topic's papers, tags, /ask, /similar), gathered for a template or a JSON answer. No HTTP
and no HTML here (the chart's SVG aside, which ``svg`` draws)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from topicpulse.insight import ask, momentum, similarity
from topicpulse.models import StoredPaper, Topic, iso
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.web.svg import weekly_chart

PAGE_SIZE = 20  # papers a topic page lists at a time
WINDOW_DAYS = 28  # "Latest papers N": the last four weeks, as `topicpulse preview` counts


class PageError(ValueError):
    """Input a page cannot use (a bad query, a bad page number): a 400 with this text."""


@dataclass(slots=True)
class PaperCard:
    paper: StoredPaper
    tags: list[Topic]

    def to_json(self) -> dict[str, Any]:
        p = self.paper
        return {
            **p.to_json(),
            "authors": list(p.authors),
            "affiliations": list(p.affiliations),
            "abstract": p.abstract,
            "tags": [t.name for t in self.tags],
        }


@dataclass(slots=True)
class TopicPage:
    name: str
    description: str
    query: str
    slug: str | None
    momentum: momentum.Momentum
    headline: str
    chart_svg: str
    latest_count: int
    page: int
    pages: int
    cards: list[PaperCard]
    answer: ask.Answer | None = None
    question: str = ""
    question_error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "slug": self.slug,
            "description": self.description,
            "query": self.query,
            "momentum": self.momentum.to_json(),
            "headline": self.headline,
            "latest": {
                "count": self.latest_count,
                "page": self.page,
                "pages": self.pages,
                "papers": [c.to_json() for c in self.cards],
            },
        }


@dataclass(slots=True)
class CatalogueRow:
    topic: Topic
    momentum: momentum.Momentum
    sparkline: str = field(default="")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.topic.name, "slug": self.topic.slug, **self.momentum.to_json()}


async def cards(store: Store, papers: list[StoredPaper]) -> list[PaperCard]:
    tags = await store.paper_topics([p.id for p in papers], kind="catalogue")
    return [PaperCard(p, tags.get(p.id, [])) for p in papers]


async def catalogue(store: Store, now: datetime) -> list[CatalogueRow]:
    """Every catalogue topic with its momentum, rising first (then by volume)."""
    topics = await store.topics(kind="catalogue")
    ms = await momentum.compute_many(store, topics, as_of=now)
    rows = [
        CatalogueRow(t, m, momentum.sparkline([c for _, c in m.weekly]))
        for t, m in zip(topics, ms, strict=True)
    ]
    rows.sort(key=lambda r: momentum.rising_first(r.momentum), reverse=True)
    return rows


async def topic_page(
    store: Store,
    now: datetime,
    *,
    topic: Topic | None = None,
    query: str = "",
    page: int = 1,
    question: str = "",
) -> TopicPage:
    """A catalogue topic's page, or (``query``) the same page for any query."""
    if topic is not None:
        topic_id, fts, name = topic.id, None, topic.name
        await store.refresh_topic_matches(topic)
    else:
        try:
            fts = ql.compile_query(query)
        except ql.QueryError as exc:
            raise PageError(f"Could not read that query: {exc}") from None
        topic_id, name = None, query
    if page < 1:
        raise PageError("Pages start at 1.")
    m = await momentum.compute(store, topic=topic, fts=fts, query=query, as_of=now)
    since, until = iso(now - timedelta(days=WINDOW_DAYS)), iso(now)
    (count,) = await store.count_windows([since, until], topic_id=topic_id, fts=fts)
    pages = max(1, -(-count // PAGE_SIZE))
    if page > pages:
        raise PageError(f"There are {pages} pages of papers.")
    shown = await store.matching_papers(
        topic_id=topic_id,
        fts=fts,
        since=since,
        until=until,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
    )
    result = TopicPage(
        name=name,
        description=topic.description if topic else "",
        query=topic.query if topic else query,
        slug=topic.slug if topic else None,
        momentum=m,
        headline=momentum.headline(m),
        chart_svg=weekly_chart(m, label=f"Papers a week on {name}, last 12 weeks"),
        latest_count=count,
        page=page,
        pages=pages,
        cards=await cards(store, shown),
        question=question,
    )
    if question and topic is not None:
        try:
            result.answer = await ask.ask(store, question, topic=topic)
        except ask.QuestionError as exc:
            result.question_error = str(exc)
    return result


async def paper_page(store: Store, paper: StoredPaper) -> tuple[PaperCard, list[PaperCard]]:
    """One paper's card and the stored papers most like it."""
    [card] = await cards(store, [paper])
    like = await similarity.similar_papers(store, paper, limit=5)
    return card, await cards(store, like)
