"""The topic query language: parse, validate, normalise and compile to SQLite FTS5.

This package owns the boolean queries researchers write to describe a topic. A query is parsed
into a small immutable AST, which is compiled to an FTS5 MATCH expression (every token is
emitted as a quoted FTS5 string, so user text never reaches FTS5 raw), rendered back to
canonical text (``normalise``, used to share identical custom topics), or evaluated in pure
Python (``matches``). In that order: ``syntax`` (tokens, the AST, limits), ``parser``,
``render`` (FTS5 and canonical text) and ``evaluate``; import from the package itself.

Grammar (EBNF)::

    query    = or_expr ;
    or_expr  = and_expr , { "OR" , and_expr } ;
    and_expr = operand , { [ "AND" ] , operand | ( "NOT" | "ANDNOT" | "AND" "NOT" ) , operand } ;
    operand  = [ field ] , ( word | phrase | "(" , or_expr , ")" ) ;
    field    = ( "ti" | "abs" | "au" | "cat" ) , ":" ;     (* directly before its operand *)
    phrase   = '"' , { character - '"' } , '"' , [ "*" ] ;
    word     = wordchar , { wordchar } ;       (* wordchar: not a space, '"', "(" or ")" *)

* NOT and ANDNOT are binary "and not"; NOT and AND bind tighter than OR (``a b OR c`` is
  ``(a AND b) OR c``). There is no unary NOT: a query must say what it wants, not only what it
  excludes.
* Words are split into tokens like FTS5's unicode61 tokenizer (letters and digits; everything
  else separates), so ``GPT-4o`` is the phrase "gpt 4o" and ``cat:cs.LG`` the phrase "cs lg".
* A word ending in ``*`` right after a letter or digit is a prefix (``optim*``); its last token
  needs at least 3 characters. Elsewhere ``*`` just separates (``cat:cs.*`` is ``cat:cs``).
  The index is Porter-stemmed and FTS5 stems a prefix as if it were a word, so on its own a
  prefix would miss every word whose stem is shorter than the prefix (``evaluat*``: the index
  holds "evaluation" as "evalu"). The compiled expression therefore also ORs in one word for
  each such stem (``evaluat*`` → ``"evaluat" * OR "evaluate"``), and a prefix finds the words
  that begin with it, as typed.
* A field applies to every term of a group (``ti:(a OR b)``); a field inside overrides it.
* Curly quotes (“ ” „) count as straight ones: phones type them.

Operator case: ``AND``, ``OR``, ``NOT`` and ``ANDNOT`` in upper case are always operators. In
lower or mixed case (``or``, ``And``) they are operators too, except where no operator can
stand: as the first or last word of the query or of a parenthesised group, or right after a
field (``ti:not``); there they are searched as ordinary words. Quote them (``"or"``) to search
them anywhere.

Limits: at most ``MAX_QUERY_LENGTH`` characters and ``MAX_NESTING`` levels of parentheses
(which keeps the compiled expression within FTS5's parser stack).
"""

from topicpulse.topics.query.evaluate import matches
from topicpulse.topics.query.parser import parse
from topicpulse.topics.query.render import (
    compile_query,
    hidden_completions,
    normalise,
    terms,
    to_fts,
    unparse,
)
from topicpulse.topics.query.syntax import (
    COLUMNS,
    FIELDS,
    MAX_NESTING,
    MAX_QUERY_LENGTH,
    MIN_PREFIX_LENGTH,
    And,
    Node,
    Not,
    Or,
    QueryError,
    Term,
    tokenize,
)

__all__ = [
    "COLUMNS",
    "FIELDS",
    "MAX_NESTING",
    "MAX_QUERY_LENGTH",
    "MIN_PREFIX_LENGTH",
    "And",
    "Node",
    "Not",
    "Or",
    "QueryError",
    "Term",
    "compile_query",
    "hidden_completions",
    "matches",
    "normalise",
    "parse",
    "terms",
    "to_fts",
    "tokenize",
    "unparse",
]
