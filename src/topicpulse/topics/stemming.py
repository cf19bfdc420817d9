"""Words as the full-text index sees them: SQLite's own FTS5 tokenizer, run on any text.

The store's index is built with ``tokenize = 'porter unicode61 remove_diacritics 2'``, so its
terms are Porter stems of case-folded, accent-stripped tokens. Python's Porter stemmers do not
quite agree with SQLite's (SQLite maps "technology" to "technolog", Snowball's ``porter`` to
"technologi"), and a stem that differs is a word whose statistics cannot be read from the
index. So the texts are tokenized by SQLite itself: put in a throw-away in-memory FTS5 table
with the same tokenizer and read back, token by token, through an ``fts5vocab`` instance view.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

TOKENIZER = "porter unicode61 remove_diacritics 2"  # as migrations/0001_papers.sql


def stem_texts(texts: Sequence[str]) -> list[list[str]]:
    """Each text's index terms, in order (a blocking call: run it in a thread on a loop)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.executemany(
            "INSERT INTO t (rowid, x) VALUES (?, ?)", ((i, text) for i, text in enumerate(texts))
        )
        found: list[list[tuple[int, str]]] = [[] for _ in texts]
        for doc, offset, term in conn.execute("SELECT doc, offset, term FROM v"):
            found[doc].append((offset, term))
        return [[term for _, term in sorted(terms)] for terms in found]
    finally:
        conn.close()
