"""The commands about papers, as the chat's topic page shows them: one paper with its topic
tags (``paper``), the papers most like it (``similar``) and the passages that answer a
question (``ask``). They call the engine functions the bot calls; text by default, JSON with
``--json``."""

from __future__ import annotations

import argparse
import textwrap

from topicpulse.cli.common import CommandError, catalogue_topic, print_json
from topicpulse.config import Settings
from topicpulse.delivery import chats
from topicpulse.delivery.chats import UserError
from topicpulse.insight import similarity
from topicpulse.insight.ask import Answer
from topicpulse.insight.llm import answer_writer
from topicpulse.models import StoredPaper, Topic
from topicpulse.sources import arxiv
from topicpulse.store import Store
from topicpulse.topics.catalogue import sync_catalogue

WIDTH = 100  # text output wraps abstracts at this width


async def stored_paper(store: Store, text: str) -> StoredPaper:
    """The stored paper ``text`` names (an id, with or without version, or an arXiv link)."""
    arxiv_id = arxiv.typed_id(text)
    if arxiv_id is None:
        raise CommandError(f"{text!r} is not an arXiv id or link: use e.g. 2605.01234")
    found = await store.get_paper(arxiv_id)
    if found is None:
        raise CommandError(
            f"paper {arxiv_id} is not stored: topicpulse poll, backfill or import brings papers in"
        )
    return found


def paper_json(paper: StoredPaper, tags: list[Topic]) -> dict[str, object]:
    return {
        "arxiv_id": paper.arxiv_id,
        "title": paper.title,
        "abstract": paper.abstract,
        "authors": list(paper.authors),
        "affiliations": list(paper.affiliations),
        "categories": list(paper.categories),
        "published": paper.published,
        "url": paper.url,
        "pdf_url": paper.pdf_url,
        "tags": [t.name for t in tags],
    }


async def cmd_paper(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        paper = await stored_paper(store, args.id)
        tags = (await store.paper_topics([paper.id], kind="catalogue")).get(paper.id, [])
    if args.json:
        print_json(paper_json(paper, tags))
        return 0
    print(f"{paper.arxiv_id}  {paper.published[:10]}  {', '.join(paper.categories)}")
    print(paper.title)
    print(f"authors:      {', '.join(paper.authors)}")
    if paper.affiliations:
        print(f"affiliations: {'; '.join(paper.affiliations)}")
    print(f"topics:       {', '.join(t.name for t in tags) or '(no catalogue topic)'}")
    print(f"links:        {paper.url}  {paper.pdf_url}")
    print()
    print(textwrap.fill(paper.abstract, WIDTH))
    return 0


async def cmd_similar(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise CommandError(f"--limit {args.limit}: give 1 or more")
    async with await Store.open(settings.db) as store:
        paper = await stored_paper(store, args.id)
        scored = await similarity.scored_similar_papers(store, paper, limit=args.limit)
    if args.json:
        print_json(
            {
                "arxiv_id": paper.arxiv_id,
                "papers": [
                    {"arxiv_id": p.arxiv_id, "title": p.title, "score": round(score, 4)}
                    for p, score in scored
                ],
            }
        )
        return 0
    print(f"papers like {paper.arxiv_id} ({paper.title}):")
    if not scored:
        print("  none stored yet")
    for p, score in scored:
        print(f"  {score:.2f}  {p.arxiv_id:<12} {p.title}")
    return 0


async def _answer(store: Store, args: argparse.Namespace) -> Answer:
    topic = await catalogue_topic(store, args.topic) if args.topic else None
    question = " ".join(args.question).strip()
    try:
        return await chats.answer_question(store, chats.check_argument(question, "question"), topic)
    except UserError as exc:
        raise CommandError(str(exc)) from None


async def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        answer = await _answer(store, args)
    written = None
    writer = answer_writer(settings)
    if writer is not None:
        try:
            if answer.passages:
                written = await writer.write(answer.question, answer.passages)
        finally:
            await writer.close()
    passages = [
        {"arxiv_id": p.paper.arxiv_id, "title": p.paper.title, "text": p.text, "url": p.paper.url}
        for p in answer.passages
    ]
    if args.json:
        shape: dict[str, object] = {
            "topic": answer.topic.name if answer.topic else None,
            "question": answer.question,
            "passages": passages,
        }
        if writer is not None:
            shape["answer"] = written
        print_json(shape)
        return 0
    scope = answer.topic.name if answer.topic else "all stored papers"
    print(f"{answer.question}  ({scope}, {answer.papers_in_scope} papers)")
    if written:
        print()
        print(textwrap.fill(written, WIDTH))
    if not passages:
        print("no stored paper answers that; try other words")
    for n, p in enumerate(passages, 1):
        print()
        print(f"[{n}] {p['title']} ({p['arxiv_id']})")
        print(
            textwrap.fill(f"“{p['text']}”", WIDTH, initial_indent="    ", subsequent_indent="    ")
        )
        print(f"    {p['url']}")
    return 0
