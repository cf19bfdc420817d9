-- Refining a topic from 👎, and the weekly /foryou (issue 24).
--
-- When several of a chat's 👎 within one topic share a word its 👍 do not, the bot offers once
-- to leave papers about it out of that topic. Every offer is kept, whatever became of it, so
-- the same word is never offered twice for the same chat and topic. An accepted offer on a
-- catalogue topic is the chat's view of it (``state`` 'left_out', ``in_query`` 0): wherever
-- the chat receives the topic's papers, those matching ``fts`` are left out (a paper another of
-- its topics matches still arrives). On a custom query the word went into the query itself
-- (``in_query`` 1; ``topic_id`` then names the query the chat follows now).
CREATE TABLE refinements (
    id         INTEGER PRIMARY KEY,
    chat_id    INTEGER NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    topic_id   INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    term       TEXT    NOT NULL,   -- a word of the query language, as offered
    fts        TEXT    NOT NULL,   -- its FTS5 expression (as the query language compiles it)
    disliked   INTEGER NOT NULL,   -- the chat's 👎 in the topic when it was offered
    state      TEXT    NOT NULL DEFAULT 'offered'
               CHECK (state IN ('offered', 'declined', 'left_out', 'restored')),
    in_query   INTEGER NOT NULL DEFAULT 0,
    offered_at TEXT    NOT NULL,
    decided_at TEXT,
    UNIQUE (chat_id, topic_id, term)
);
-- The chats' views: probed per (chat, topic) wherever papers reach a chat.
CREATE INDEX refinements_left_out ON refinements (chat_id, topic_id)
    WHERE state = 'left_out' AND in_query = 0;

-- The weekly /foryou (opt-in): ``weekly_next_at`` is when the next one is due (UTC); it moves
-- on in the same statement that records the week's message as sent — once a week, across
-- restarts.
ALTER TABLE tastes ADD COLUMN weekly INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tastes ADD COLUMN weekly_next_at TEXT;
CREATE INDEX tastes_weekly_due ON tastes (weekly_next_at) WHERE weekly = 1;
