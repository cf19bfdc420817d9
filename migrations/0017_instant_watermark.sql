-- Instant alerts are assembled from the matches too, like digests (issue 25): a round no longer
-- queues one outbox row per instant chat and paper (at 100,000 chats, millions a round), it
-- marks the instant chats whose topics matched something: `alerts_due` is the newest fanned-out
-- paper id of the rounds that marked the chat, cleared when an alert through it is accepted;
-- `alerts_since` the age rule of the earliest of them (papers announced before it are history).
-- An instant chat's `digest_through` is then, as a digest chat's, the newest fanned-out paper
-- its alerts have covered. Existing instant chats start where the engine stands: everything
-- matched before is already in their outbox.
ALTER TABLE chats ADD COLUMN alerts_due INTEGER;
ALTER TABLE chats ADD COLUMN alerts_since TEXT;
UPDATE chats SET digest_through = max(digest_through, coalesce(
    (SELECT value FROM engine_state WHERE key = 'fanned_out_through'), 0))
    WHERE mode = 'instant';
-- The delivery pass reads the instant chats marked, without scanning every chat.
CREATE INDEX chats_alerts_due ON chats (chat_id) WHERE alerts_due IS NOT NULL;
