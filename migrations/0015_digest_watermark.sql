-- Digests are assembled from the matches, not from per-paper outbox rows (issue 25): a digest
-- chat's `digest_through` is the newest fanned-out paper its digests have covered; its next
-- digest is what its topics matched after it (and any paper rows still pending from before).
-- Rounds queue paper rows for instant chats only. Existing digest chats start where the engine
-- stands: everything before is already in their outbox.
ALTER TABLE chats ADD COLUMN digest_through INTEGER NOT NULL DEFAULT 0;
UPDATE chats SET digest_through = coalesce(
    (SELECT value FROM engine_state WHERE key = 'fanned_out_through'), 0);
-- The digest pass reads the chats due, oldest due first, without scanning every chat.
CREATE INDEX chats_digest_due ON chats (next_digest_at)
    WHERE mode IN ('daily', 'weekly') AND active = 1 AND paused = 0;
