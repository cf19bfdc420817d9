-- How many papers use each indexed term (a Porter stem, as the full-text index stores it):
-- /ask weighs a question's words by their rarity across the whole store (BM25's inverse
-- document frequency). A view of papers_fts's own index: nothing to keep in step.
CREATE VIRTUAL TABLE papers_fts_terms USING fts5vocab(papers_fts, 'row');
