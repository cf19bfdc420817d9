-- Chats, their subscriptions and settings, and the durable outbox of messages to send.

CREATE TABLE chats (
    chat_id        INTEGER PRIMARY KEY,
    type           TEXT    NOT NULL DEFAULT 'private',  -- private, group, supergroup, channel
    title          TEXT,
    active         INTEGER NOT NULL DEFAULT 1,          -- 0 after 403 / chat not found
    paused         INTEGER NOT NULL DEFAULT 0,
    mode           TEXT    NOT NULL DEFAULT 'instant' CHECK (mode IN ('instant', 'daily', 'weekly')),
    digest_time    TEXT    NOT NULL DEFAULT '08:00',    -- HH:MM in `timezone`
    digest_weekday INTEGER NOT NULL DEFAULT 0,          -- weekly digests: 0 = Monday
    timezone       TEXT    NOT NULL DEFAULT 'UTC',      -- IANA name
    spikes         INTEGER NOT NULL DEFAULT 1,
    next_digest_at TEXT,                                -- UTC; due time of the next digest
    created_at     TEXT    NOT NULL,
    updated_at     TEXT    NOT NULL
);

CREATE TABLE subscriptions (
    chat_id        INTEGER NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    topic_id       INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    after_paper_id INTEGER NOT NULL,   -- only papers stored after the follow (papers.id > this)
    created_at     TEXT    NOT NULL,
    PRIMARY KEY (chat_id, topic_id)
) WITHOUT ROWID;
CREATE INDEX subscriptions_by_topic ON subscriptions (topic_id, chat_id);

-- Every message topicpulse owes a chat. Written in the same transaction as the matches that
-- cause it; marked sent only after Telegram accepted it. A paper reaches a chat at most once,
-- whatever topics matched it or versions appeared (unique on chat and paper).
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY,
    chat_id    INTEGER NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    kind       TEXT    NOT NULL CHECK (kind IN ('paper', 'spike')),
    paper_id   INTEGER REFERENCES papers (id) ON DELETE CASCADE,
    episode_id INTEGER REFERENCES spike_episodes (id) ON DELETE CASCADE,
    created_at TEXT    NOT NULL,
    state      TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'dropped')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    sent_at    TEXT,
    last_error TEXT,
    CHECK ((kind = 'paper') = (paper_id IS NOT NULL)),
    CHECK ((kind = 'spike') = (episode_id IS NOT NULL))
);
CREATE UNIQUE INDEX outbox_paper_once ON outbox (chat_id, paper_id) WHERE kind = 'paper';
CREATE UNIQUE INDEX outbox_spike_once ON outbox (chat_id, episode_id) WHERE kind = 'spike';
CREATE INDEX outbox_pending ON outbox (chat_id, id) WHERE state = 'pending';
