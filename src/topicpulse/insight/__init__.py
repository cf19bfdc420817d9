"""Insight: what the stored, matched papers say. Momentum and its chart (``momentum``,
``charts``), papers like a given one (``similarity``), topics defined by example papers
(``examples``), and answers to a question from the abstracts (``ask``, ``llm``)."""
