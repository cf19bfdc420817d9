-- When a shared query was last used (its web page shown, its link opened): daily upkeep forgets
-- the codes nobody has used for a long while, so queries typed into the page once (by anyone,
-- or by a crawler) do not pile up for good. Refreshed at most once a day per query.
ALTER TABLE shared_queries ADD COLUMN used_at TEXT;
UPDATE shared_queries SET used_at = created_at;
CREATE INDEX shared_queries_used ON shared_queries (used_at);
