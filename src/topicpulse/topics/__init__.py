"""Topics: what a paper is about. The query language (``query``), the curated catalogue and
users' own queries (``catalogue``, ``catalogue.toml``), the words as the index sees them
(``stemming``), and matching each round's new papers against every topic (``matching``)."""
