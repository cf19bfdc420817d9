-- What the daily maintenance job needs to prune without scanning whole tables.

-- Custom topics: when the last follower left (NULL while followed, or never followed since
-- this migration). Topics nobody has followed for a while are removed with their matches.
ALTER TABLE topics ADD COLUMN unfollowed_at TEXT;

-- Settled deliveries (sent or dropped), oldest first: pruned past the dedup horizon.
CREATE INDEX outbox_settled ON outbox (created_at) WHERE state != 'pending';

CREATE INDEX ingest_runs_started ON ingest_runs (started_at);
