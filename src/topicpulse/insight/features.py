"""Papers' TF-IDF vectors, with their stems cached per process.

Stemming is the costly part of a paper's vector (``similarity.paper_stems`` runs SQLite's own
tokenizer, ≈ 0.3 ms a paper), and the same papers come back again and again: the background
every taste trains against, a round's new papers scored for each chat's digest, a topic's
recent papers for each follower's hold-back floor. So each process (the bot, each worker)
keeps the stems of the last ``CACHED`` texts it met, compactly (a tuple of interned stems and
a byte per count, ≈ 1 kB a paper), keyed by a digest of the text; a vector is then built from
them and the store's document frequencies (``Store.term_documents``, cached by the store), by
the formula of ``similarity.tfidf``, each term's idf kept while the store's paper count holds.
A taste scores papers from their stems directly (``Vectors.dots``), building no vector. The
words a taste's "why?" names are found the same way (``stem_words``). Pure Python: the bot's
process scores digests with it and never imports numpy.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import sys
from collections import OrderedDict
from collections.abc import Sequence
from typing import overload

from topicpulse.insight.similarity import HasText, Vector, paper_stems
from topicpulse.store import Store
from topicpulse.topics.stemming import stem_texts

CACHED = 5_000  # texts whose stems a process keeps (≈ 1 kB each)
WORDS = 50_000  # words whose stem a process keeps (for "why?"'s readable words)
MAX_COUNT = 255  # a stem's count in one text, capped (an abstract has ≈ 250 words)

Stems = tuple[tuple[str, ...], bytes]  # distinct stems in order of appearance, their counts


class StemCache:
    """The stems of the texts met last, at most ``size`` (least recently used go first)."""

    def __init__(self, size: int = CACHED) -> None:
        self.size = size
        self._items: OrderedDict[bytes, Stems] = OrderedDict()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()

    async def stems(self, papers: Sequence[HasText]) -> list[Stems]:
        """Each text's stems (title words counted twice), from the cache or stemmed now (in a
        thread: it blocks)."""
        keys = [_key(p) for p in papers]
        found: list[Stems | None] = []
        for key in keys:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            found.append(got)
        missing = [n for n, got in enumerate(found) if got is None]
        self.hits += len(papers) - len(missing)
        self.misses += len(missing)
        if missing:
            counted = await asyncio.to_thread(paper_stems, [papers[n] for n in missing])
            for n, counts in zip(missing, counted, strict=True):
                stems = (
                    tuple(sys.intern(t) for t in counts),
                    bytes(min(k, MAX_COUNT) for k in counts.values()),
                )
                found[n] = stems
                self._items[keys[n]] = stems
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return [s for s in found if s is not None]


def _key(paper: HasText) -> bytes:
    text = f"{paper.title}\0{paper.abstract}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


cache = StemCache()  # this process's


async def vectors(store: Store, papers: Sequence[HasText]) -> list[Vector]:
    """Each paper's unit TF-IDF vector over the index's stems (``similarity.tfidf``'s)."""
    return list(await lazy_vectors(store, papers))


async def lazy_vectors(store: Store, papers: Sequence[HasText]) -> Vectors:
    """``vectors``, each built when it is read (what is never read costs only its stems)."""
    if not papers:
        return Vectors([], _Idf(0))
    found = await cache.stems(papers)
    terms = set().union(*(stems for stems, _ in found))
    idf = _idf_of(store, await store.count_papers())
    missing = [t for t in terms if t not in idf and t not in idf.documents]
    if missing:
        idf.documents.update(await store.term_documents(missing))
    return Vectors(found, idf)


class _Idf(dict[str, float]):
    """log(N / df) of each term, computed when first asked for (a term the store lacks: df 1).
    Kept per process while the store's paper count stays the same (``_idf_of``): the same
    terms come back in every call, and their logarithms with them."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.documents: dict[str, int] = {}
        self.total, self.n = total, max(total, 2)

    def __missing__(self, term: str) -> float:
        df = max(min(self.documents.get(term, 1), self.total), 1)
        self[term] = idf = math.log(self.n / df)
        return idf


# per database (a worker process opens a store of its own for each call): its terms' idf
_idfs: dict[str, _Idf] = {}
_IDF_TERMS = 200_000  # terms kept (≈ 20 MB), as the store keeps their counts


def store_key(store: Store) -> str:
    """What a per-process cache keys a database by: its path (a worker process opens a store
    of its own for each call), or an in-memory store's identity."""
    return store.path if store.file_backed() else f":memory:{id(store)}"


def _idf_of(store: Store, total: int) -> _Idf:
    key = store_key(store)
    idf = _idfs.get(key)
    if idf is None or idf.total != total or len(idf.documents) > _IDF_TERMS:
        if len(_idfs) > 8:
            _idfs.clear()
        _idfs[key] = idf = _Idf(total)
    return idf


class Vectors(Sequence[Vector]):
    """Unit TF-IDF vectors, each built from its stems when read."""

    def __init__(self, found: list[Stems], idf: _Idf) -> None:
        self._found, self._idf = found, idf

    def __len__(self) -> int:
        return len(self._found)

    @overload
    def __getitem__(self, n: int) -> Vector: ...
    @overload
    def __getitem__(self, n: slice) -> list[Vector]: ...
    def __getitem__(self, n: int | slice) -> Vector | list[Vector]:
        if isinstance(n, slice):
            return [_unit(*stems, self._idf) for stems in self._found[n]]
        return _unit(*self._found[n], self._idf)

    def dots(self, weights: dict[str, float]) -> list[float]:
        """Each vector's dot product with ``weights``, without building the vectors (a
        taste's scores: half the work of reading them)."""
        idf, found = self._idf, []
        for stems, counts in self._found:
            dot = norm = 0.0
            for t, k in zip(stems, counts, strict=True):
                x = _LOG_TF[k] * idf[t]
                norm += x * x
                if t in weights:
                    dot += x * weights[t]
            found.append(dot / (math.sqrt(norm) or 1.0))
        return found


_LOG_TF = [0.0] + [1 + math.log(k) for k in range(1, MAX_COUNT + 1)]


def _unit(stems: tuple[str, ...], counts: bytes, idf: dict[str, float]) -> Vector:
    values = [_LOG_TF[k] * idf[t] for t, k in zip(stems, counts, strict=True)]
    norm = math.sqrt(sum([x * x for x in values])) or 1.0
    return dict(zip(stems, [x / norm for x in values], strict=True))


_words: dict[str, str] = {}


def stem_words(words: Sequence[str]) -> list[str]:
    """Each word's index stem ('' for none), cached in this process (blocking: a thread)."""
    known = {w: _words[w] for w in dict.fromkeys(words) if w in _words}
    missing = [w for w in dict.fromkeys(words) if w not in known]
    if missing:
        if len(_words) + len(missing) > WORDS:
            _words.clear()
        for word, stems in zip(missing, stem_texts(missing), strict=True):
            known[word] = _words[word] = stems[0] if stems else ""
    return [known[w] for w in words]
