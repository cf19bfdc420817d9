"""Digests assembled from the matches: a digest is the list of papers the chat's topics matched
since its watermark (``Chat.digest_through``), with any paper rows still pending for it, packed
into at most ``DIGEST_MESSAGES`` messages or folded into one catch-up over all of them.

No outbox row per paper and chat is needed (``store.digests`` says why and how it stays exactly
once). ``digest_papers`` is the list; ``assemble`` turns it into messages, each of which knows
what it settles (``Settles``): the last moves the watermark and sets the next digest time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from topicpulse.delivery import formatting
from topicpulse.delivery.chats import next_digest_at, published_since
from topicpulse.delivery.messages import CATCH_UP_BEST, FOLD_PROBE, Outgoing
from topicpulse.models import Chat, StoredPaper, Topic, iso
from topicpulse.store import Store

DIGEST_MESSAGES = 2  # a longer digest is one message: counts, the best papers, /latest buttons


@dataclass(slots=True)
class DigestPaper:
    paper_id: int
    published: str
    topics: list[Topic]  # the chat's topics that match it, in the order it followed them
    outbox_id: int | None = None  # a pending row it comes from (else from the matches)


@dataclass(slots=True)
class Digest:
    """What a digest due now holds, and where it leaves the chat."""

    chat: Chat
    papers: list[DigestPaper]
    through: int  # the watermark after it
    next_at: str | None  # the next digest time after it
    messages: list[Outgoing] = field(default_factory=list)


@dataclass(slots=True)
class Settles:
    """What an accepted digest message settles (``Outgoing.digest``)."""

    chat: Chat
    paper_ids: list[int]  # papers without a pending row (from the matches)
    through: int | None  # None: more messages of this digest follow
    next_at: str | None = None


async def digest_papers(store: Store, chat: Chat, now: datetime) -> Digest:
    """The papers of the chat's digest due at ``now``, oldest first: its topics' matches since
    its watermark, up to what the rounds have fanned out, and its pending paper rows."""
    through = await store.fanned_out_through()
    due = next_digest_at(chat, now)
    digest = Digest(chat, [], max(through, chat.digest_through), iso(due) if due else None)
    topics = {s.topic.id: s.topic for s in await store.subscriptions(chat.chat_id)}
    matches = await store.digest_matches(
        chat.chat_id,
        after=chat.digest_through,
        through=through,
        published_since=published_since(chat.mode, now),
    )
    pending = await store.pending_for_chat(chat.chat_id, limit=1_000_000, kind="paper")
    rows = {i.paper_id: i.id for i in pending if i.paper_id is not None}
    tags = await store.chat_topics_for_papers(chat.chat_id, list(rows))
    found = {p.id: p for p in await store.papers_by_ids(list(rows))}
    papers = [
        DigestPaper(pid, found[pid].published, tags.get(pid, []), rows[pid])
        for pid in rows
        if pid in found
    ]
    papers += [
        DigestPaper(pid, published, [topics[t] for t in ids if t in topics])
        for pid, (published, ids) in matches.items()
        if pid not in rows
    ]
    digest.papers = sorted(papers, key=lambda p: p.paper_id)
    return digest


async def assemble(store: Store, chat: Chat, now: datetime) -> Digest:
    """``digest_papers`` and its messages: the digest in at most ``DIGEST_MESSAGES``, or one
    catch-up over all of it (none when it is empty)."""
    digest = await digest_papers(store, chat, now)
    if not digest.papers:
        return digest
    period = chat.mode
    probe = digest.papers[:FOLD_PROBE]
    alerts = await _alerts(store, probe)
    packed = formatting.pack_digest(alerts, period=period)
    if len(packed) <= DIGEST_MESSAGES and len(digest.papers) > FOLD_PROBE:
        alerts = await _alerts(store, digest.papers)  # (packing more never takes fewer)
        packed = formatting.pack_digest(alerts, period=period)
    if len(packed) > DIGEST_MESSAGES:
        digest.messages = [await _catch_up(store, digest)]
        return digest
    by_id = {p.paper_id: p for p in digest.papers}
    for n, (text, paper_ids) in enumerate(packed, start=1):
        last = n == len(packed)
        parts = [by_id[pid] for pid in paper_ids]
        if last:  # the last message settles whatever the packing left out (nothing, usually)
            shown = {pid for _, ids in packed for pid in ids}
            parts += [p for p in digest.papers if p.paper_id not in shown]
        digest.messages.append(_outgoing(digest, parts, text, last=last))
    return digest


def _outgoing(digest: Digest, parts: list[DigestPaper], text: str, *, last: bool) -> Outgoing:
    message = Outgoing(
        digest.chat.chat_id,
        [p.outbox_id for p in parts if p.outbox_id is not None],
        text,
        preview=len(parts) == 1,
    )
    message.digest = Settles(
        digest.chat,
        [p.paper_id for p in parts if p.outbox_id is None],
        digest.through if last else None,
        digest.next_at if last else None,
    )
    return message


async def _alerts(store: Store, papers: list[DigestPaper]) -> list[formatting.Alert]:
    ids = [p.paper_id for p in papers]
    found = {p.id: p for p in await store.papers_by_ids(ids)}
    catalogue = await store.paper_topics(ids, kind="catalogue")
    return [
        formatting.Alert(found[p.paper_id], p.topics, catalogue.get(p.paper_id, []))
        for p in papers
        if p.paper_id in found
    ]


async def _catch_up(store: Store, digest: Digest) -> Outgoing:
    """The digest folded into one message: counts per topic, the best few (the papers on the
    most of the chat's topics, newest first among equals), ``/latest`` buttons for the rest."""
    papers = digest.papers
    counts: Counter[int] = Counter()
    named: dict[int, Topic] = {}
    for paper in papers:
        for topic in paper.topics:
            counts[topic.id] += 1
            named.setdefault(topic.id, topic)
    order = {tid: n for n, tid in enumerate(named)}  # first followed first among equals
    ranked = sorted(counts, key=lambda tid: (-counts[tid], order[tid]))
    best = sorted(papers, key=lambda p: (len(p.topics), p.published, p.paper_id), reverse=True)
    best = best[:CATCH_UP_BEST]
    found: dict[int, StoredPaper] = {
        p.id: p for p in await store.papers_by_ids([p.paper_id for p in best])
    }
    text, buttons = formatting.catch_up(
        total=len(papers),
        counts=[(named[tid], counts[tid]) for tid in ranked],
        best=[formatting.Alert(found[p.paper_id], p.topics) for p in best if p.paper_id in found],
        period=digest.chat.mode,
    )
    message = _outgoing(digest, papers, text, last=True)
    message.folded = True
    message.buttons = buttons or None
    return message
