"""Rows to models: the columns each query selects, and the mapping read by column name."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from topicpulse.models import Chat, OutboxItem, Paper, SpikeEpisode, StoredPaper, Topic

CHUNK = 500  # ids bound in one IN (...) list
# The newest paper whose alerts a round has queued (``TopicQueries.fanned_out_through``), in SQL
FANNED_OUT = "coalesce((SELECT value FROM engine_state WHERE key = 'fanned_out_through'), 0)"
M = TypeVar("M")
T = TypeVar("T")

PAPER_COLUMNS = (
    "id, arxiv_id, version, title, abstract, authors, primary_category, categories, "
    "published, updated, stored_at, comment, journal_ref, doi, affiliations"
)


def columns(cls: type) -> str:
    """The columns a model is read from: its fields, by name."""
    return ", ".join(f.name for f in dataclasses.fields(cls))


TOPIC_COLUMNS = columns(Topic)
EPISODE_COLUMNS = columns(SpikeEpisode)
CHAT_COLUMNS = columns(Chat)
OUTBOX_COLUMNS = columns(OutboxItem)
# A topic as one chat sees it (joined with its subscription ``s``): named as that chat spelled it
CHAT_TOPIC_COLUMNS = ", ".join(
    "coalesce(s.label, t.name) AS name" if c == "name" else f"t.{c}"
    for c in TOPIC_COLUMNS.split(", ")
)
# A chat's subscriptions with their topics as it sees them, in the order it followed them
FOLLOWED = (
    f"SELECT s.chat_id, s.created_at AS followed_at, s.thread_id, {CHAT_TOPIC_COLUMNS}"
    " FROM subscriptions s JOIN topics t ON t.id = s.topic_id"
    " WHERE s.chat_id = ? ORDER BY s.created_at, t.name COLLATE NOCASE"
)


LEFT_OUT = "state = 'left_out' AND in_query = 0"  # a refinement that leaves papers out of a view


def in_view(chat: str, topic: str, paper: str) -> str:
    """SQL: the paper is in the chat's view of the topic — it matches none of the words the
    chat left out of that topic (``refinements``; the arguments are SQL expressions)."""
    return (
        "NOT EXISTS (SELECT 1 FROM refinements x JOIN papers_fts xf ON xf.rowid = "
        f"{paper} AND xf.papers_fts MATCH x.fts WHERE x.chat_id = {chat} AND x.topic_id = {topic}"
        " AND x.state = 'left_out' AND x.in_query = 0)"  # (LEFT_OUT, of the alias x)
    )


# Whether any chat has left a word out of a topic (the fan-out then checks the views)
ANY_LEFT_OUT = f"SELECT EXISTS (SELECT 1 FROM refinements WHERE {LEFT_OUT})"


def prefixed(columns: str, alias: str) -> str:
    """``"a, b"`` → ``"t.a, t.b"`` (the same names, read from a joined table)."""
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


def chunks(values: Sequence[T]) -> Iterator[list[T]]:
    """``values`` in slices of at most ``CHUNK``, to bind in ``IN (...)`` lists."""
    for start in range(0, len(values), CHUNK):
        yield list(values[start : start + CHUNK])


def marks(values: Any) -> str:
    return ",".join("?" * len(values))


def stored_paper(row: sqlite3.Row) -> StoredPaper:
    return StoredPaper(
        id=row["id"],
        arxiv_id=row["arxiv_id"],
        version=row["version"],
        title=row["title"],
        abstract=row["abstract"],
        authors=tuple(json.loads(row["authors"])),
        primary_category=row["primary_category"],
        categories=tuple(row["categories"].split()),
        published=row["published"],
        updated=row["updated"],
        stored_at=row["stored_at"],
        comment=row["comment"],
        journal_ref=row["journal_ref"],
        doi=row["doi"],
        affiliations=tuple(json.loads(row["affiliations"])),
    )


def searchable(paper: Paper | StoredPaper) -> tuple[str, str, str, str]:
    """(title, abstract, authors, categories) as the papers table, and so its FTS index, holds
    them: authors a JSON list, categories space-separated."""
    authors = json.dumps(list(paper.authors), ensure_ascii=False)
    return paper.title, paper.abstract, authors, " ".join(paper.categories)


def paper_values(paper: Paper) -> tuple[Any, ...]:
    """The values of ``PAPER_WRITE_COLUMNS`` for a paper (without ``stored_at``)."""
    title, abstract, authors, categories = searchable(paper)
    return (
        paper.arxiv_id,
        paper.version,
        title,
        abstract,
        authors,
        paper.primary_category,
        categories,
        paper.published,
        paper.updated,
        paper.comment,
        paper.journal_ref,
        paper.doi,
        json.dumps(list(paper.affiliations), ensure_ascii=False),
    )


PAPER_WRITE_COLUMNS = (
    "arxiv_id, version, title, abstract, authors, primary_category, categories, published,"
    " updated, comment, journal_ref, doi, affiliations"
)


def model(cls: type[M], row: sqlite3.Row, *, flags: tuple[str, ...] = ()) -> M:
    """A dataclass from the row's columns of the same names (``flags``: 0/1 → bool)."""
    values = {f.name: row[f.name] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name in flags:
        values[name] = bool(values[name])
    return cls(**values)


def topic(row: sqlite3.Row) -> Topic:
    return model(Topic, row, flags=("active",))


def episode(row: sqlite3.Row) -> SpikeEpisode:
    return model(SpikeEpisode, row)


def chat(row: sqlite3.Row) -> Chat:
    return model(Chat, row, flags=("active", "paused", "spikes"))


def outbox_item(row: sqlite3.Row) -> OutboxItem:
    return model(OutboxItem, row)
