-- The authors' institutions as arXiv gives them (arxiv:affiliation), distinct, in author order:
-- a JSON list like ``authors``. Papers stored before this migration have none until arXiv
-- sends them again (a new version, or the poll's overlap window).
ALTER TABLE papers ADD COLUMN affiliations TEXT NOT NULL DEFAULT '[]';
