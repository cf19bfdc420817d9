"""Topics: the curated catalogue (``catalogue.toml``) and users' own queries.

Turns what a user types — a catalogue name, a slug, or a query in topicpulse's query language —
into a stored ``Topic``. Catalogue topics are loaded and updated at start; custom topics are
created on first follow and shared by everyone who writes the same (normalised) query.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from topicpulse.models import Topic
from topicpulse.store import Store
from topicpulse.topics import query as ql


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    slug: str
    name: str
    description: str
    query: str


class UnknownTopic(LookupError):
    """No catalogue topic has that name or slug; ``suggestions`` are the closest names."""

    def __init__(self, text: str, suggestions: list[str]) -> None:
        self.text = text
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"No topic called “{text}”.{hint}")


_SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# Curated queries are written once and measured (evaluation/), not typed in a chat: they may be
# longer than a user's query, within what FTS5 parses comfortably.
CATALOGUE_QUERY_LENGTH = 1_500


def load_catalogue(path: Path | None = None) -> list[CatalogueEntry]:
    """Read and validate the catalogue: unique slugs and names, every query parses."""
    if path is None:
        text = (resources.files("topicpulse.topics") / "catalogue.toml").read_text("utf-8")
    else:
        text = path.read_text("utf-8")
    entries = []
    for raw in tomllib.loads(text)["topic"]:
        entry = CatalogueEntry(
            slug=raw["slug"], name=raw["name"], description=raw["description"], query=raw["query"]
        )
        if not _SLUG.match(entry.slug):
            raise ValueError(f"catalogue slug {entry.slug!r} must be lowercase words joined by -")
        try:
            ql.parse(entry.query, max_length=CATALOGUE_QUERY_LENGTH)
        except ql.QueryError as exc:
            raise ValueError(f"catalogue topic {entry.name!r}: {exc}") from None
        entries.append(entry)
    for attr in ("slug", "name"):
        values = [getattr(e, attr).casefold() for e in entries]
        dupes = {v for v in values if values.count(v) > 1}
        if dupes:
            raise ValueError(f"duplicate catalogue {attr}s: {sorted(dupes)}")
    return entries


async def sync_catalogue(store: Store, entries: list[CatalogueEntry] | None = None) -> int:
    """Load catalogue topics into the store (new, changed, removed), and store the compiled
    expression of every custom query anew where the query compiler changed. Returns how many
    catalogue topics there are."""
    entries = load_catalogue() if entries is None else entries
    stored = {
        t.slug: (t.name, t.description, t.query, t.fts, t.active)
        for t in await store.topics(kind="catalogue", active_only=False)
    }
    for entry in entries:
        node = ql.parse(entry.query, max_length=CATALOGUE_QUERY_LENGTH)
        now = (entry.name, entry.description, entry.query, ql.to_fts(node), True)
        if stored.get(entry.slug) == now:
            continue  # unchanged: no write
        await store.upsert_catalogue_topic(
            slug=entry.slug,
            name=entry.name,
            description=entry.description,
            query=entry.query,
            normalised=ql.unparse(node),
            fts=ql.to_fts(node),
        )
    if any(
        active and slug not in {e.slug for e in entries} for slug, (*_, active) in stored.items()
    ):
        await store.deactivate_catalogue_topics(e.slug for e in entries)
    for topic in await store.topics(kind="custom", active_only=False):
        try:
            fts = ql.to_fts(ql.parse(topic.query, max_length=None))
        except ql.QueryError:  # valid when it was followed; keep what it compiled to then
            continue
        if fts != topic.fts:
            await store.recompile_topic(topic.id, fts)
    return len(entries)


def _key(text: str) -> str:
    return " ".join(text.casefold().replace("_", "-").split())


async def find_catalogue_topic(store: Store, text: str) -> Topic | None:
    """The catalogue topic whose name or slug is ``text`` (case-insensitive), if any."""
    key = _key(text)
    for topic in await store.topics(kind="catalogue"):
        if key in (_key(topic.name), topic.slug):
            return topic
    return None


async def resolve_topic(store: Store, text: str, *, extra: list[Topic] | None = None) -> Topic:
    """A catalogue topic (or one of ``extra``, e.g. a chat's custom topics) by name or slug.

    Raises ``UnknownTopic`` with the closest names when nothing matches.
    """
    key = _key(text)
    for topic in extra or []:
        if key in (_key(topic.name), topic.slug, _key(topic.query)):
            return topic
    found = await find_catalogue_topic(store, text)
    if found:
        return found
    names = [t.name for t in await store.topics(kind="catalogue")] + [t.name for t in extra or []]
    by_key = {_key(n): n for n in names}
    close = difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.5)
    if not close:  # fall back to names containing a word of the input
        words = [w for w in key.split() if len(w) > 2]
        close = [k for k in by_key if any(w in k for w in words)][:3]
    raise UnknownTopic(text, [by_key[k] for k in close])


async def custom_topic(
    store: Store, text: str, *, max_length: int | None = ql.MAX_QUERY_LENGTH
) -> Topic:
    """The shared custom topic for a query (raises ``query.QueryError`` if malformed);
    ``max_length=None`` for a query the bot wrote (``examples``), not one a user typed.

    Chats that follow the same query share one topic, so it is named by the query's canonical
    form, never by how one chat spelled it (another chat would see that spelling)."""
    node = ql.parse(text, max_length=max_length)
    canonical = ql.unparse(node)  # may exceed the input limit; never parsed with the limit
    topic_id = await store.custom_topic(
        name=canonical,
        query=canonical,
        normalised=ql.normalise(text, max_length=max_length),
        fts=ql.to_fts(node),
    )
    topic = await store.topic(topic_id)
    assert topic is not None
    return topic


async def topic_for(store: Store, text: str) -> Topic:
    """What ``/follow <text>`` means: a catalogue name or slug, otherwise a custom query."""
    found = await find_catalogue_topic(store, text)
    return found if found else await custom_topic(store, text)
