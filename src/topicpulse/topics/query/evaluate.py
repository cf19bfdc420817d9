"""Evaluating an AST against one paper in pure Python: a naive baseline and a cross-check of
what FTS5 finds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from topicpulse.topics.query.syntax import COLUMNS, And, Node, Not, Or, Term, tokenize

# Tried in this order: longer endings first.
# fmt: off
_SUFFIXES = (
    "ational", "ization", "isation", "ations", "ation", "ments", "ment", "ness", "izing", "ising",
    "izers", "izer", "ized", "ised", "izes", "ises", "ize", "ise", "ings", "ing", "ies", "ied",
    "ers", "er", "ed", "es", "ly", "al", "s", "e", "y",
)
# fmt: on


def _stem(token: str) -> str:
    """A crude suffix-stripping stemmer (not Porter's): enough to equate simple inflections."""
    for suffix in _SUFFIXES:
        if (
            token.endswith(suffix)
            and len(token) - len(suffix) >= 3
            and not (suffix == "s" and token.endswith("ss"))
        ):
            return token[: -len(suffix)]
    return token


@dataclass(frozen=True, slots=True)
class _Column:
    tokens: list[str]
    stems: list[str]

    def has(self, term: Term) -> bool:
        wanted = [_stem(t) for t in term.tokens]
        last = len(wanted) - 1
        for start in range(len(self.tokens) - last):
            if self.stems[start : start + last] != wanted[:last]:
                continue
            if term.prefix and self.tokens[start + last].startswith(term.tokens[last]):
                return True
            if not term.prefix and self.stems[start + last] == wanted[last]:
                return True
        return False


def _evaluate(node: Node, columns: dict[str, _Column]) -> bool:
    match node:
        case Term():
            names = [node.field] if node.field else COLUMNS
            return any(columns[name].has(node) for name in names)
        case And():
            return all(_evaluate(i, columns) for i in node.items)
        case Or():
            return any(_evaluate(i, columns) for i in node.items)
        case Not():
            return _evaluate(node.positive, columns) and not _evaluate(node.negative, columns)


def matches(node: Node, paper: Mapping[str, object]) -> bool:
    """Evaluate a query against a paper in pure Python (a naive baseline and a cross-check).

    ``paper`` has ``title`` and ``abstract`` (str) and ``authors`` and ``categories`` (lists of
    str, or one str). Tokens are compared after a crude stemming, which only approximates the
    Porter stemmer FTS5 uses; a prefix matches the start of an unstemmed word.
    """
    columns = {}
    for name in COLUMNS:
        tokens = tokenize(_column_text(paper.get(name)))
        columns[name] = _Column(tokens, [_stem(t) for t in tokens])
    return _evaluate(node, columns)


def _column_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Iterable):
        return " ".join(str(v) for v in value)
    return ""
