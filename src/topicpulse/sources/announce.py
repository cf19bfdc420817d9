"""What a harvested OAI-PMH record means to us: a paper to store, its version, and when arXiv
announced it into the categories we follow. Pure functions; the intake rounds call them.

The ``arXiv`` metadata format gives the first version's date (``created``), the latest
version's (``updated``, absent for a paper never replaced) and the record's last change
(``datestamp``), not the version number nor the announcement. So:

- **version**: a record without ``updated`` is version 1; with it, at least 2. A stored paper
  never goes down a version, and goes up one when ``updated`` is later than the stored copy's.
- **announced**, for a paper new to the store: a first version (no ``updated``) whose record
  appears within ``LATE_ANNOUNCEMENT`` of its submission was announced on its datestamp — a
  paper held in moderation for three weeks, or cross-listed into a followed category after it
  first appeared elsewhere, is news on that day. A replaced paper new to us (a replacement of a
  paper older than our history, or a later cross-list of a replaced one), or a record that
  changed long after submission (a journal reference added), is history: announced on its
  first version's date, so it is stored but never alerted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta

from topicpulse.models import Paper
from topicpulse.sources.oai import OaiRecord

LATE_ANNOUNCEMENT = timedelta(days=30)


@dataclass(slots=True)
class Sorted:
    """A harvested page, sorted: the papers to store and their announcement dates."""

    papers: list[Paper] = field(default_factory=list)
    announced: dict[str, str] = field(default_factory=dict)  # new papers only
    elsewhere: int = 0  # records of categories we do not follow
    older: int = 0  # papers submitted before the history we keep
    deleted: int = 0
    newest_stamp: str = ""  # the latest datestamp on the page


def sort_records(
    records: list[OaiRecord],
    categories: Collection[str],
    known: Mapping[str, tuple[int, str]],
    *,
    oldest: str | None = None,
) -> Sorted:
    """The records of a page as papers to upsert. ``known``: (version, updated) of the papers
    the store holds already. A stored paper is updated whatever its categories now are; a new
    one is kept only if it is in one of ``categories`` and, with ``oldest`` (a day), was first
    submitted on or after it (a history harvest lists every record changed since its start,
    older papers among them)."""
    wanted = set(categories)
    out = Sorted()
    for record in records:
        out.newest_stamp = max(out.newest_stamp, record.datestamp)
        if record.deleted or record.paper is None:
            out.deleted += record.deleted
            continue
        paper = record.paper
        stored = known.get(paper.arxiv_id)
        if stored is None and not wanted.intersection(paper.categories):
            out.elsewhere += 1
            continue
        if stored is None and oldest and paper.published[:10] < oldest:
            out.older += 1
            continue
        version = version_of(record, stored)
        if version != paper.version:  # (a copy costs ~10 µs: thousands a page, on the loop)
            paper = dataclasses.replace(paper, version=version)
        out.papers.append(paper)
        if stored is None:
            out.announced[paper.arxiv_id] = announced_on(record)
    return out


def version_of(record: OaiRecord, stored: tuple[int, str] | None) -> int:
    """The version to store: OAI-PMH's lower bound, never below what the store holds."""
    lower = 2 if record.revised else 1
    if stored is None:
        return lower
    version, updated = stored
    assert record.paper is not None
    newer = record.revised and record.paper.updated[:10] > updated[:10]
    return max(lower, version + 1 if newer else version)


def announced_on(record: OaiRecord) -> str:
    """When arXiv announced a paper new to us (ISO-8601 UTC), by the rule above."""
    assert record.paper is not None
    published = record.paper.published
    if record.revised or not record.datestamp:
        return published
    stamp = date.fromisoformat(record.datestamp)
    if stamp - date.fromisoformat(published[:10]) > LATE_ANNOUNCEMENT:
        return published
    return max(published, f"{record.datestamp}T00:00:00Z")
