"""The OAI-PMH side of the fake arXiv (``GET /oai``), written from arXiv's documentation of its
interface and the shape of its recorded responses (``shared/arxiv-oai``).

``ListRecords`` in the ``arXiv`` metadata format: records of the papers whose datestamp (the
paper's ``updated`` day, or ``datestamps[arxiv_id]``) lies in ``from``/``until`` (inclusive
days) and that belong to ``set`` (a group ``cs``, an archive ``physics:hep-th`` or a category
``cs:cs:AI``, matched against all of a paper's categories), in datestamp order, ``page_size``
a page, each page but the last ending in a resumption token with ``cursor`` and
``completeListSize``. ``expire_tokens()`` makes every token handed out so far answer
``badResumptionToken``; nothing matching is ``noRecordsMatch``; a missing or unknown
``metadataPrefix`` is ``cannotDisseminateFormat``, other misuse ``badArgument``.

Not modelled: other verbs (Identify, ListSets, GetRecord …), other metadata formats (oai_dc,
arXivRaw), deleted records (``deleted`` lists ids to report as deleted), ``until`` finer than a
day, and the server's real page size (2,000) unless a test sets it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from topicpulse.models import Paper

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"'
    ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
    "  <responseDate>{now}</responseDate>\n"
    "  <request{attributes}>{url}</request>\n"
)


def _group(category: str) -> str:
    archive, _, _ = category.partition(".")
    return (
        archive
        if archive in {"cs", "econ", "eess", "math", "q-bio", "q-fin", "stat"}
        else "physics"
    )


def in_set(paper: Paper, set_spec: str) -> bool:
    """Whether the paper belongs to an OAI-PMH set (``cs``, ``physics:hep-th``, ``cs:cs:AI``)."""
    if not set_spec:
        return True
    for category in paper.categories:
        archive, _, sub = category.partition(".")
        spec = f"{_group(category)}:{archive}" + (f":{sub}" if sub else "")
        if spec == set_spec or spec.startswith(set_spec + ":"):
            return True
    return False


def render_record(paper: Paper, datestamp: str, *, deleted: bool = False) -> str:
    sets = "".join(
        f"<setSpec>{_group(c)}:{c.partition('.')[0]}"
        + (f":{c.partition('.')[2]}" if "." in c else "")
        + "</setSpec>"
        for c in paper.categories
    )
    status = ' status="deleted"' if deleted else ""
    header = (
        f"<header{status}>"
        f"<identifier>oai:arXiv.org:{paper.arxiv_id}</identifier>"
        f"<datestamp>{datestamp}</datestamp>{sets}</header>"
    )
    if deleted:
        return f"<record>{header}</record>"
    authors = "".join(
        f"<author><keyname>{escape(name.rpartition(' ')[2])}</keyname>"
        f"<forenames>{escape(name.rpartition(' ')[0])}</forenames></author>"
        for name in paper.authors
    )
    optional = "".join(
        f"<{tag}>{escape(value)}</{tag}>"
        for tag, value in (
            ("comments", paper.comment),
            ("journal-ref", paper.journal_ref),
            ("doi", paper.doi),
        )
        if value
    )
    updated = f"<updated>{paper.updated[:10]}</updated>" if paper.version > 1 else ""
    return (
        f"<record>{header}<metadata>"
        '<arXiv xmlns="http://arxiv.org/OAI/arXiv/">'
        f"<id>{paper.arxiv_id}</id><created>{paper.published[:10]}</created>{updated}"
        f"<authors>{authors}</authors><title>{escape(paper.title)}</title>"
        f"<categories>{' '.join(paper.categories)}</categories>{optional}"
        "<license>http://creativecommons.org/licenses/by/4.0/</license>"
        f"<abstract>{escape(paper.abstract)}</abstract></arXiv></metadata></record>"
    )


def render_error(code: str, message: str, *, now: str, url: str) -> bytes:
    head = HEAD.format(now=now, attributes="", url=url)
    return f'{head}  <error code="{code}">{escape(message)}</error>\n</OAI-PMH>\n'.encode()


@dataclass
class FakeOai:
    """The state of the ``/oai`` endpoint; ``FakeArxiv`` serves it."""

    page_size: int = 2000
    datestamps: dict[str, str] = field(default_factory=dict)
    deleted: dict[str, str] = field(default_factory=dict)  # arxiv_id → datestamp
    now: str = "2026-05-23T03:00:00Z"  # responseDate
    _tokens: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)
    _serial: itertools.count[int] = field(default_factory=itertools.count)

    def expire_tokens(self) -> None:
        self._tokens.clear()

    def datestamp(self, paper: Paper) -> str:
        return self.datestamps.get(paper.arxiv_id, paper.updated[:10])

    def answer(self, papers: Sequence[Paper], params: dict[str, str], url: str) -> bytes:
        """The body of ``GET /oai`` for ``params`` (always HTTP 200, as OAI-PMH answers)."""

        def error(code: str, message: str) -> bytes:
            return render_error(code, message, now=self.now, url=url)

        if params.get("verb") != "ListRecords":
            return error("badVerb", "only ListRecords is modelled")
        if "resumptionToken" in params:
            if set(params) != {"verb", "resumptionToken"}:
                return error("badArgument", "resumptionToken is an exclusive argument")
            found = self._tokens.get(params["resumptionToken"])
            if found is None:
                return error("badResumptionToken", "The resumption token has expired")
            set_spec, since, until, offset = found
        else:
            if params.get("metadataPrefix") != "arXiv":
                return error("cannotDisseminateFormat", "only metadataPrefix=arXiv is modelled")
            extra = set(params) - {"verb", "metadataPrefix", "set", "from", "until"}
            if extra:
                return error("badArgument", f"unknown arguments {sorted(extra)}")
            set_spec, since = params.get("set", ""), params.get("from", "")
            until, offset = params.get("until", ""), 0
        rows = [(self.datestamp(p), p, False) for p in papers if in_set(p, set_spec)]
        rows += [
            (day, p, True) for p in papers for i, day in self.deleted.items() if i == p.arxiv_id
        ]
        rows = [r for r in rows if (not since or r[0] >= since) and (not until or r[0] <= until)]
        rows.sort(key=lambda r: (r[0], r[1].arxiv_id))
        if not rows:
            return error(
                "noRecordsMatch", "The combination of the values results in an empty list."
            )
        chunk = rows[offset : offset + self.page_size]
        body = "".join(render_record(p, day, deleted=gone) for day, p, gone in chunk)
        end = offset + len(chunk)
        if end < len(rows):
            token = f"{next(self._serial)}|{end}"
            self._tokens[token] = (set_spec, since, until, end)
            body += (
                f'<resumptionToken cursor="{offset}" completeListSize="{len(rows)}"'
                f' expirationDate="2026-05-24T03:00:00Z">{token}</resumptionToken>'
            )
        elif offset:
            body += f'<resumptionToken cursor="{offset}" completeListSize="{len(rows)}"/>'
        attributes = "".join(f' {k}="{escape(v)}"' for k, v in sorted(params.items()))
        head = HEAD.format(now=self.now, attributes=attributes, url=url)
        return f"{head}  <ListRecords>{body}</ListRecords>\n</OAI-PMH>\n".encode()
