-- Custom topics are shared by every chat that follows the same query, so a topic's name must
-- not be one chat's spelling (another chat would see it, invisible characters included). Each
-- subscription keeps the chat's own spelling; the topic is named by its canonical query.
ALTER TABLE subscriptions ADD COLUMN label TEXT;
UPDATE topics SET name = query WHERE kind = 'custom';
