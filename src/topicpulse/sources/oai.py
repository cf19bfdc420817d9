"""arXiv's OAI-PMH interface: one ``ListRecords`` page in the ``arXiv`` metadata format, read
into papers (issue 22: history and new papers from arXiv's recommended bulk interface).

A page holds up to a few thousand records and, unless it is the last, a resumption token
that asks for the next one (tokens expire: an expired one is answered with the
``badResumptionToken`` error, and the harvest starts again from its watermark). A harvest
that matches nothing is the ``noRecordsMatch`` error, read here as an empty last page, not a
failure. Any other error document raises ``OaiError`` with its code and words.

What the ``arXiv`` format says and does not:
- ``created`` is the first version's date, ``updated`` the latest version's (absent for a
  paper never replaced). Dates only: ``published`` is that day at 00:00 UTC.
- the version number is not given: a record without ``updated`` is version 1, one with it is
  *at least* version 2 (``OaiRecord.revised``); the API or ``arXivRaw`` says which.
- ``categories`` lists the primary category first; the header's ``setSpec``s are sets.
- authors come separated (``keyname``, ``forenames``, ``suffix``); an ``affiliation`` inside an
  author is read where a record carries one.
- a deleted record has ``status="deleted"`` in its header and no metadata.
"""

from __future__ import annotations

import pickle
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from topicpulse.models import Paper

_OAI = "{http://www.openarchives.org/OAI/2.0/}"
_ARXIV = "{http://arxiv.org/OAI/arXiv/}"
NO_RECORDS = "noRecordsMatch"
BAD_TOKEN = "badResumptionToken"


class OaiError(ValueError):
    """An OAI-PMH error document (``code`` as the protocol names it), or a page that is not
    OAI-PMH at all (``code`` "malformed")."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"OAI-PMH {code}: {message}" if message else f"OAI-PMH {code}")
        self.code, self.message = code, message

    def __reduce__(self) -> tuple[type[OaiError], tuple[str, str]]:
        return OaiError, (self.code, self.message)  # (raised in a worker process, re-raised here)


@dataclass(frozen=True, slots=True)
class ResumptionToken:
    value: str
    expires: str | None = None  # ISO-8601, when the server says
    complete_list_size: int | None = None
    cursor: int | None = None


@dataclass(frozen=True, slots=True)
class OaiRecord:
    arxiv_id: str
    datestamp: str  # YYYY-MM-DD: the record's last change
    deleted: bool = False
    sets: tuple[str, ...] = ()
    paper: Paper | None = None  # None for a deleted record
    revised: bool = False  # replaced at least once (``updated`` given): version ≥ 2


@dataclass(slots=True)
class OaiPage:
    response_date: str  # the server's clock: the next harvest's ``from`` is taken from it
    records: list[OaiRecord] = field(default_factory=list)
    token: ResumptionToken | None = None  # None: the last page
    skipped: int = 0  # records without the fields a paper needs
    kept: object = None  # what a harvest's ``keep`` made of the page where it was parsed

    @property
    def papers(self) -> list[Paper]:
        return [r.paper for r in self.records if r.paper is not None]


def _text(element: ET.Element | None, tag: str) -> str | None:
    found = element.find(tag) if element is not None else None
    if found is None or found.text is None:
        return None
    text = " ".join(found.text.split())
    return text or None


def _author(element: ET.Element) -> tuple[str, tuple[str, ...]]:
    parts = [_text(element, f"{_ARXIV}{tag}") for tag in ("forenames", "keyname", "suffix")]
    name = " ".join(p for p in parts if p)
    places = tuple(
        " ".join(a.text.split()) for a in element.findall(f"{_ARXIV}affiliation") if a.text
    )
    return name, places


def _paper(metadata: ET.Element) -> tuple[Paper, bool] | None:
    arxiv = metadata.find(f"{_ARXIV}arXiv")
    if arxiv is None:
        return None
    arxiv_id = _text(arxiv, f"{_ARXIV}id")
    title = _text(arxiv, f"{_ARXIV}title")
    created = _text(arxiv, f"{_ARXIV}created")
    categories = tuple(dict.fromkeys((_text(arxiv, f"{_ARXIV}categories") or "").split()))
    if not (arxiv_id and title and created and categories):
        return None
    updated = _text(arxiv, f"{_ARXIV}updated")
    authors: list[str] = []
    places: list[str] = []
    for element in arxiv.iterfind(f"{_ARXIV}authors/{_ARXIV}author"):
        name, theirs = _author(element)
        if name:
            authors.append(name)
        places += theirs
    paper = Paper(
        arxiv_id=arxiv_id,
        version=2 if updated else 1,
        title=title,
        abstract=_text(arxiv, f"{_ARXIV}abstract") or "",
        authors=tuple(authors),
        primary_category=categories[0],
        categories=categories,
        published=f"{created}T00:00:00Z",
        updated=f"{updated or created}T00:00:00Z",
        comment=_text(arxiv, f"{_ARXIV}comments"),
        journal_ref=_text(arxiv, f"{_ARXIV}journal-ref"),
        doi=_text(arxiv, f"{_ARXIV}doi"),
        affiliations=tuple(dict.fromkeys(places)),
    )
    return paper, updated is not None


def _token(element: ET.Element | None) -> ResumptionToken | None:
    if element is None or not (element.text or "").strip():
        return None  # the last page (an empty token element says so too)
    size, cursor = element.get("completeListSize"), element.get("cursor")
    return ResumptionToken(
        value=(element.text or "").strip(),
        expires=element.get("expirationDate") or element.get("expires"),
        complete_list_size=int(size) if size and size.isdigit() else None,
        cursor=int(cursor) if cursor and cursor.isdigit() else None,
    )


def list_headers(data: bytes) -> tuple[list[tuple[str, str]], str | None]:
    """(arXiv id, datestamp) of each header of a ``ListIdentifiers`` page (``noRecordsMatch``:
    none), and the resumption token of the next page (None: the last). Raises ``OaiError`` as
    ``parse_list_records`` does."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise OaiError("malformed", f"not XML ({exc})") from None
    errors = root.findall(f"{_OAI}error")
    codes = [e.get("code", "") for e in errors]
    if codes == [NO_RECORDS]:
        return [], None
    if errors:
        raise OaiError(codes[0], " ".join((errors[0].text or "").split()))
    listing = root.find(f"{_OAI}ListIdentifiers")
    if listing is None:
        raise OaiError("malformed", "no ListIdentifiers element")
    headers = [
        (
            (_text(h, f"{_OAI}identifier") or "").removeprefix("oai:arXiv.org:"),
            _text(h, f"{_OAI}datestamp") or "",
        )
        for h in listing.iterfind(f"{_OAI}header")
    ]
    token = _token(listing.find(f"{_OAI}resumptionToken"))
    return headers, token.value if token else None


PACKED_RECORDS = 100  # records a pickled part of a page holds (``parse_packed``)


def parse_packed(data: bytes) -> tuple[OaiPage, list[bytes]]:
    """``parse_list_records`` in a worker process: the page without its records, and the
    records pickled ``PACKED_RECORDS`` at a time. The bot's process then unpickles one part at
    a time between other work (``OaiHarvester``): a page of 2,000 records, unpickled in one
    go, would hold the GIL — and every reply — for tens of milliseconds."""
    page = parse_list_records(data)
    records, page.records = page.records, []
    parts = range(0, len(records), PACKED_RECORDS)
    return page, [pickle.dumps(records[n : n + PACKED_RECORDS]) for n in parts]


def parse_list_records(data: bytes) -> OaiPage:
    """One ``ListRecords`` response (``metadataPrefix=arXiv``) as papers and the next token.

    Raises ``OaiError`` for an error document (except ``noRecordsMatch``: an empty last page)
    and for a body that is not an OAI-PMH response."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise OaiError("malformed", f"not XML ({exc})") from None
    if root.tag != f"{_OAI}OAI-PMH":
        raise OaiError("malformed", f"not an OAI-PMH response (root {root.tag!r})")
    page = OaiPage(response_date=_text(root, f"{_OAI}responseDate") or "")
    errors = root.findall(f"{_OAI}error")
    if errors:
        codes = [e.get("code", "") for e in errors]
        if codes == [NO_RECORDS]:
            return page
        first = errors[0]
        raise OaiError(first.get("code", "unknown"), " ".join((first.text or "").split()))
    listing = root.find(f"{_OAI}ListRecords")
    if listing is None:
        raise OaiError("malformed", "no ListRecords element")
    for record in listing.iterfind(f"{_OAI}record"):
        header = record.find(f"{_OAI}header")
        identifier = _text(header, f"{_OAI}identifier") or ""
        arxiv_id = identifier.removeprefix("oai:arXiv.org:")
        if header is None or not arxiv_id:
            page.skipped += 1
            continue
        datestamp = _text(header, f"{_OAI}datestamp") or ""
        sets = tuple(s.text.strip() for s in header.findall(f"{_OAI}setSpec") if s.text)
        if header.get("status") == "deleted":
            page.records.append(OaiRecord(arxiv_id, datestamp, deleted=True, sets=sets))
            continue
        metadata = record.find(f"{_OAI}metadata")
        parsed = _paper(metadata) if metadata is not None else None
        if parsed is None:
            page.skipped += 1
            continue
        paper, revised = parsed
        page.records.append(OaiRecord(arxiv_id, datestamp, False, sets, paper, revised))
    page.token = _token(listing.find(f"{_OAI}resumptionToken"))
    return page
