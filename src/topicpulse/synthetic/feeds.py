"""Synthetic papers written out as arXiv writes them: the JSON-lines listing that
``topicpulse import`` reads, and API Atom feeds in the element order of real responses (the fake
arXiv server in the tests writes its pages with ``render_feed``)."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from topicpulse.models import Paper, iso

SOURCE = "topicpulse.synthetic"
ARXIV_SCHEME = "http://arxiv.org/schemas/atom"


# ---------------------------------------------------------------------------------- jsonl
def paper_to_jsonl(paper: Paper) -> dict[str, Any]:
    """One line of a JSON-lines listing (the keys of ``arxiv-listings/papers.jsonl``); the
    listing ``date`` is the first-version date, which ``topicpulse import`` reads back."""
    return {
        "arxiv_id": paper.arxiv_id,
        "title": paper.title,
        "abstract": paper.abstract,
        "authors": list(paper.authors),
        "categories": list(paper.categories),
        "date": paper.published[:10],
        "source": SOURCE,
    }


def write_jsonl(papers: Iterable[Paper], path: Path) -> Path:
    """Write a listing ``topicpulse import`` reads; returns ``path``."""
    with path.open("w", encoding="utf-8") as handle:
        for paper in papers:
            handle.write(json.dumps(paper_to_jsonl(paper), ensure_ascii=False) + "\n")
    return path


# ---------------------------------------------------------------------------------- Atom
def _wrapped(text: str, width: int | None) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) if width else text


def render_entry(paper: Paper, *, wrap: int | None = None) -> str:
    """One ``<entry>`` exactly as arXiv writes it (element order of recorded API responses).
    With ``wrap``, title and summary carry hard line breaks as many real abstracts do."""
    versioned = f"{paper.arxiv_id}v{paper.version}"
    lines = [
        "  <entry>",
        f"    <id>http://arxiv.org/abs/{versioned}</id>",
        f"    <title>{escape(_wrapped(paper.title, wrap))}</title>",
        f"    <updated>{paper.updated}</updated>",
        f'    <link href="https://arxiv.org/abs/{versioned}" rel="alternate" type="text/html"/>',
        f'    <link href="https://arxiv.org/pdf/{versioned}" rel="related"'
        ' type="application/pdf" title="pdf"/>',
        f"    <summary>{escape(_wrapped(paper.abstract, wrap))}</summary>",
    ]
    lines += [
        f'    <category term={quoteattr(c)} scheme="{ARXIV_SCHEME}"/>' for c in paper.categories
    ]
    lines.append(f"    <published>{paper.published}</published>")
    if paper.comment is not None:
        lines.append(f"    <arxiv:comment>{escape(paper.comment)}</arxiv:comment>")
    lines.append(f"    <arxiv:primary_category term={quoteattr(paper.primary_category)}/>")
    if paper.journal_ref is not None:
        lines.append(f"    <arxiv:journal_ref>{escape(paper.journal_ref)}</arxiv:journal_ref>")
    # arXiv gives affiliations per author; ours are per paper, one to each author in turn
    places = list(paper.affiliations)
    for n, author in enumerate(paper.authors):
        lines += ["    <author>", f"      <name>{escape(author)}</name>"]
        if n < len(places):
            more = places[n:] if n == len(paper.authors) - 1 else [places[n]]
            lines += [f"      <arxiv:affiliation>{escape(a)}</arxiv:affiliation>" for a in more]
        lines.append("    </author>")
    if paper.doi is not None:
        lines.append(f"    <arxiv:doi>{escape(paper.doi)}</arxiv:doi>")
        lines.append(
            f'    <link rel="related" href={quoteattr("https://doi.org/" + paper.doi)}'
            ' title="doi"/>'
        )
    lines.append("  </entry>")
    return "\n".join(lines)


def query_string(search_query: str, start: int, max_results: int) -> str:
    return f"search_query={search_query}&id_list=&start={start}&max_results={max_results}"


def render_feed(
    papers: Sequence[Paper],
    *,
    search_query: str = "",
    start: int = 0,
    max_results: int = 10,
    total_results: int | None = None,
    updated: str | None = None,
    wrap: int | None = None,
) -> bytes:
    """A complete arXiv API response holding ``papers`` (one page of a query); ``updated``
    (the feed's own timestamp) defaults to now, as arXiv stamps each response."""
    query = query_string(search_query, start, max_results)
    digest = hashlib.sha1(query.encode()).hexdigest()[:27]
    head = [
        "<?xml version='1.0' encoding='UTF-8'?>",
        '<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"'
        f' xmlns:arxiv="{ARXIV_SCHEME}" xmlns="http://www.w3.org/2005/Atom">',
        f"  <id>https://arxiv.org/api/{digest}</id>",
        f"  <title>arXiv Query: {escape(query)}</title>",
        f"  <updated>{updated or iso(datetime.now(UTC))}</updated>",
        f"  <link href={quoteattr('https://arxiv.org/api/query?' + query)}"
        ' type="application/atom+xml"/>',
        f"  <opensearch:itemsPerPage>{max_results}</opensearch:itemsPerPage>",
        "  <opensearch:totalResults>"
        f"{len(papers) if total_results is None else total_results}</opensearch:totalResults>",
        f"  <opensearch:startIndex>{start}</opensearch:startIndex>",
    ]
    body = [render_entry(p, wrap=wrap) for p in papers]
    return "\n".join([*head, *body, "</feed>", ""]).encode("utf-8")


def to_atom(
    papers: Sequence[Paper],
    *,
    total: int | None = None,
    start: int = 0,
    max_results: int | None = None,
    search_query: str = "cat:cs.CL",
    wrap: int | None = None,
) -> bytes:
    """An arXiv API Atom feed of ``papers``: the page at ``start`` of ``total`` results
    (default: just these). Deterministic: the feed is stamped with the latest ``updated``."""
    return render_feed(
        papers,
        search_query=search_query,
        start=start,
        max_results=len(papers) if max_results is None else max_results,
        total_results=total,
        updated=max((p.updated for p in papers), default="2007-04-02T00:00:00Z"),
        wrap=wrap,
    )
