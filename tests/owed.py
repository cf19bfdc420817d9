"""What the engine owes a chat, read as the engine reads it: the papers its next instant alert
(or digest) would hold — its topics' matches since its watermark and its pending paper rows
(``delivery.digests.digest_papers``) — for an instant chat only once a round marked it (or it
has rows pending), as the delivery pass finds it. Rounds queue no row per chat and paper, so
tests ask this instead of the outbox."""

from __future__ import annotations

from datetime import datetime

from topicpulse.delivery.digests import digest_papers
from topicpulse.models import utcnow
from topicpulse.store import Store


async def owed(store: Store, chat_id: int, now: datetime | None = None) -> list[str]:
    """The arXiv ids the chat is owed, oldest first."""
    chat = await store.chat(chat_id)
    if chat is None or not chat.active or chat.paused:
        return []
    if chat.mode == "instant":
        due = await store.instant_chats_due(limit=10**9)
        pending = await store.pending_for_chat(chat_id, limit=1, kind="paper")
        if chat_id not in due and not pending:
            return []
    digest = await digest_papers(store, chat, now or utcnow())
    papers = await store.papers_by_ids([p.paper_id for p in digest.papers])
    return [p.arxiv_id for p in papers]


async def owed_total(store: Store, now: datetime | None = None) -> int:
    """Everything still to deliver: pending outbox rows (papers and spikes) and the papers the
    marked instant chats are owed from the matches."""
    # The marked chats first, the rows after: a failed alert turns what a chat is owed from
    # the matches into pending rows in one transaction, which the other order could miss
    # between its two reads (seen as a flaky "drained" under load).
    total = 0
    for chat_id in await store.instant_chats_due(limit=10**9):
        chat = await store.chat(chat_id)
        if chat is not None:
            digest = await digest_papers(store, chat, now or utcnow())
            total += sum(p.outbox_id is None for p in digest.papers)
    return total + (await store.outbox_counts()).get("pending", 0)
