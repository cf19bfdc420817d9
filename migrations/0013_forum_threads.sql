-- Forum supergroups: a subscription remembers the forum topic (message_thread_id) its /follow
-- came from, and alerts for it go there. NULL: the General topic, or a chat without topics.
ALTER TABLE subscriptions ADD COLUMN thread_id INTEGER;
-- When a send found the forum topic a chat's alerts go to closed (TOPIC_CLOSED): its admins were
-- told then, once; the alerts stay pending until a send goes through again. NULL: not closed.
ALTER TABLE chats ADD COLUMN topic_closed_at TEXT;
