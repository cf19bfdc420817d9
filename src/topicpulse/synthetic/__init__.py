"""The generated test corpus: synthetic arXiv papers, deterministic and written from scratch.

The test suite, the benchmarks and demos run on these papers, so a fresh clone needs no
recorded arXiv data. ``papers`` makes them (``generate_papers``), ``feeds`` writes them as
listings and Atom feeds, ``vocabulary`` and ``themes.toml`` hold the words they are made of.
Nothing in the pipeline imports this package.
"""

from topicpulse.synthetic.feeds import (
    ARXIV_SCHEME,
    SOURCE,
    paper_to_jsonl,
    query_string,
    render_entry,
    render_feed,
    to_atom,
    write_jsonl,
)
from topicpulse.synthetic.papers import (
    AUTHOR_SHARES,
    VERSION_SHARES,
    WEEKDAY_WEIGHTS,
    daily_counts,
    generate_papers,
)

__all__ = [
    "ARXIV_SCHEME",
    "AUTHOR_SHARES",
    "SOURCE",
    "VERSION_SHARES",
    "WEEKDAY_WEIGHTS",
    "daily_counts",
    "generate_papers",
    "paper_to_jsonl",
    "query_string",
    "render_entry",
    "render_feed",
    "to_atom",
    "write_jsonl",
]
