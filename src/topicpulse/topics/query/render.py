"""Rendering an AST: as an FTS5 MATCH expression (``to_fts``), or back as canonical query
text (``unparse``, ``normalise``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Literal

from topicpulse.topics.query.parser import parse
from topicpulse.topics.query.syntax import (
    MAX_QUERY_LENGTH,
    OPERATORS,
    PREFIX_OF,
    And,
    Node,
    Not,
    Or,
    Term,
    common_field,
    items_of,
    with_field,
)
from topicpulse.topics.stemming import stem_texts


def terms(node: Node) -> Iterator[Term]:
    """Every term of a query, left to right (negated ones too)."""
    if isinstance(node, Term):
        yield node
    elif isinstance(node, And | Or):
        for item in node.items:
            yield from terms(item)
    else:
        yield from terms(node.positive)
        yield from terms(node.negative)


# Endings tried after a prefix to find the words FTS5's prefix search cannot see (see the package
# docstring); Porter's steps 2–5 strip these or reduce them to a shorter stem.
# fmt: off
_ENDINGS = (
    "e", "es", "ed", "ing", "ion", "ions", "ive", "or", "ors", "y", "ies", "ce", "cy", "t", "ts",
    "te", "tion", "ation", "ization", "isation", "ity", "al", "ment", "ness", "ant", "ance",
    "ancy", "ent", "ence", "ency", "ous", "ic", "ical", "ism", "ist", "ize", "ise", "able",
    "ible", "er", "ers", "ly", "s", "ze", "zed", "zation", "se", "sed", "sation", "ess", "ities",
)
# fmt: on


@functools.lru_cache(maxsize=4096)
def hidden_completions(prefix: str) -> tuple[str, ...]:
    """Words that begin with ``prefix`` but that an FTS5 prefix search for it misses, one per
    index stem: their Porter stem does not begin with the prefix's own stem."""
    words = [prefix + ending for ending in _ENDINGS]
    searched, *stems = stem_texts([prefix, *words])
    head = searched[0] if len(searched) == 1 else prefix
    found: dict[str, str] = {}
    for word, stem in zip(words, stems, strict=True):
        if len(stem) == 1 and not stem[0].startswith(head):
            found.setdefault(stem[0], word)
    return tuple(found.values())


def _phrase(tokens: Iterable[str]) -> str:
    return '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'


def _fts_term(term: Term) -> str:
    phrase = _phrase(term.tokens)
    if term.prefix:
        *head, last = term.tokens
        hidden = [_phrase([*head, word]) for word in hidden_completions(last)]
        phrase = " OR ".join([f"{phrase} *", *hidden])
        if hidden:
            phrase = f"({phrase})"
    return f"{term.field} : {phrase}" if term.field else phrase


def to_fts(node: Node) -> str:
    """Compile an AST to an FTS5 MATCH expression: quoted tokens, every group parenthesised."""
    if isinstance(node, Term):
        return _fts_term(node)
    field = common_field(node)
    if field is not None:
        return f"{field} : {to_fts(with_field(node, field, None))}"
    match node:
        case And() | Or():
            operator = " AND " if isinstance(node, And) else " OR "
            return "(" + operator.join(to_fts(i) for i in node.items) + ")"
        case Not():
            return f"({to_fts(node.positive)} NOT {to_fts(node.negative)})"


def compile_query(text: str) -> str:
    """``to_fts(parse(text))``."""
    return to_fts(parse(text))


def _unparse_term(term: Term) -> str:
    if len(term.tokens) > 1 or term.tokens[0].upper() in OPERATORS:
        text = '"' + " ".join(term.tokens) + '"'
    else:
        text = term.tokens[0]
    if term.prefix:
        text += "*"
    return f"{PREFIX_OF[term.field]}:{text}" if term.field else text


def _unparse(node: Node, level: Literal["or", "and", "atom"]) -> str:
    """Render ``node`` where an operand binding at least as tight as ``level`` is needed:
    "or" (anything), "and" (no bare OR) or "atom" (a term or a parenthesised group)."""
    if isinstance(node, Term):
        return _unparse_term(node)
    field = common_field(node)
    if field is not None:
        return f"{PREFIX_OF[field]}:({_unparse(with_field(node, field, None), 'or')})"
    match node:
        case Or():
            text = " OR ".join(_unparse(i, "and") for i in node.items)
        case And():
            text = " ".join(_unparse(i, "atom") for i in node.items)
        case Not():
            excluded = (_unparse(i, "atom") for i in items_of(Or, node.negative))
            text = " NOT ".join([_unparse(node.positive, "and"), *excluded])
    fits = level == "or" or (level == "and" and not isinstance(node, Or))
    return text if fits else f"({text})"


def unparse(node: Node) -> str:
    """Render an AST in the query language, canonically: ``parse(unparse(n)) == n``."""
    return _unparse(node, "or")


def normalise(text: str, *, max_length: int | None = MAX_QUERY_LENGTH) -> str:
    """The canonical text of a query (``unparse(parse(text))``): equal for equivalent spellings
    such as ``Reward  Model`` and ``reward AND model``. Raises QueryError if invalid."""
    return unparse(parse(text, max_length=max_length))
