"""The OAI-PMH side of the fake arXiv (``GET /oai``), written from arXiv's documentation of its
interface and the shape of its recorded responses (``shared/arxiv-oai``).

``ListRecords`` in the ``arXiv`` metadata format (and ``ListIdentifiers``: the same list,
headers only): records of the papers whose datestamp (``datestamps[arxiv_id]``, else the
paper's ``updated`` day, but never before the day the server's clock read when the paper, as
it is, first appeared here: a record added after a harvest is dated at least that harvest's
day) lies in ``from``/``until`` (inclusive days) and that belong to ``set`` (a group ``cs``,
an archive ``physics:hep-th`` or a category ``cs:cs:AI``, matched against all of a paper's
categories), in datestamp order, ``page_size`` a page, each page but the last ending in a
resumption token with ``cursor`` and ``completeListSize``. ``expire_tokens()`` makes every
token handed out so far answer ``badResumptionToken``; nothing matching is ``noRecordsMatch``;
a missing or unknown ``metadataPrefix`` is ``cannotDisseminateFormat``, other misuse
``badArgument``. The FakeArxiv around it scripts transport faults (503 with Retry-After, 5xx,
HTML pages, truncated bodies, slow answers) for both interfaces.

Not modelled: other verbs (Identify, ListSets, GetRecord …), other metadata formats (oai_dc,
arXivRaw), the new server's token ``expires`` semantics beyond ``expire_tokens()``, affiliations
(the new server's ``arXiv`` format has none; arXivRaw does), bulk datestamp rewrites of old
records, ``until`` finer than a day, the time of day at which a record appears (a test moves
the papers, or sets ``datestamps``), and the server's page size (2,000) unless a test sets it.
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
    # responseDate; None: the end of the latest datestamp served (the server's clock is past
    # every change it lists, so a harvest's watermark never skips a record added later)
    now: str | None = None
    _tokens: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)
    # A record that appears after a harvest was answered is dated at least that answer's day
    # (arXiv stamps a record when it changes): the day the server's clock read when each
    # paper (as it is now) first showed up here.
    _appeared: dict[Paper, str] = field(default_factory=dict)
    _clock: str = ""
    _serial: itertools.count[int] = field(default_factory=itertools.count)

    def expire_tokens(self) -> None:
        self._tokens.clear()

    def datestamp(self, paper: Paper) -> str:
        if paper.arxiv_id in self.datestamps:
            return self.datestamps[paper.arxiv_id]
        return max(paper.updated[:10], self._appeared.get(paper, ""))

    def answer(self, papers: Sequence[Paper], params: dict[str, str], url: str) -> bytes:
        """The body of ``GET /oai`` for ``params`` (always HTTP 200, as OAI-PMH answers)."""

        for paper in papers:
            self._appeared.setdefault(paper, self._clock)
        stamps = [self.datestamp(p) for p in papers] + list(self.deleted.values())
        now = self.now or f"{max(stamps, default='2000-01-01')}T23:59:59Z"
        self._clock = max(self._clock, now[:10])

        def error(code: str, message: str) -> bytes:
            return render_error(code, message, now=now, url=url)

        verb = params.get("verb")
        if verb not in ("ListRecords", "ListIdentifiers"):
            return error("badVerb", "only ListRecords and ListIdentifiers are modelled")
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
        if verb == "ListIdentifiers":  # the records' headers only
            body = "".join(
                render_record(p, day, deleted=gone)
                .removeprefix("<record>")
                .removesuffix("</record>")
                .partition("<metadata>")[0]
                for day, p, gone in chunk
            )
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
        head = HEAD.format(now=now, attributes=attributes, url=url)
        return f"{head}  <{verb}>{body}</{verb}>\n</OAI-PMH>\n".encode()
