-- Topics (curated catalogue and users' own queries), their matches, and spike episodes.

CREATE TABLE topics (
    id              INTEGER PRIMARY KEY,
    kind            TEXT    NOT NULL CHECK (kind IN ('catalogue', 'custom')),
    slug            TEXT    UNIQUE,               -- catalogue topics only
    name            TEXT    NOT NULL,
    description     TEXT    NOT NULL DEFAULT '',
    query           TEXT    NOT NULL,             -- in topicpulse's query language
    normalised      TEXT    NOT NULL,             -- canonical form of `query`
    fts             TEXT    NOT NULL,             -- compiled FTS5 MATCH expression
    active          INTEGER NOT NULL DEFAULT 1,   -- 0: dropped from the catalogue
    matched_through INTEGER NOT NULL DEFAULT 0,   -- topic_papers is complete for papers.id <= this
    created_at      TEXT    NOT NULL
);
-- Two users writing the same query share one custom topic.
CREATE UNIQUE INDEX topics_custom_normalised ON topics (normalised) WHERE kind = 'custom';

-- Which papers each topic matches. `published` is copied from papers so that momentum
-- windows are index range counts on (topic_id, published).
CREATE TABLE topic_papers (
    topic_id  INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    paper_id  INTEGER NOT NULL REFERENCES papers (id) ON DELETE CASCADE,
    published TEXT    NOT NULL,
    PRIMARY KEY (topic_id, paper_id)
) WITHOUT ROWID;
CREATE INDEX topic_papers_by_time ON topic_papers (topic_id, published);
CREATE INDEX topic_papers_by_paper ON topic_papers (paper_id);

-- A spike episode opens when a topic's momentum crosses the spike thresholds and closes once
-- the condition has been false for two consecutive weeks; one alert per episode.
CREATE TABLE spike_episodes (
    id          INTEGER PRIMARY KEY,
    topic_id    INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    started_at  TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    last_4w     INTEGER NOT NULL,
    prev_4w     INTEGER NOT NULL,
    change_pct  REAL,
    quiet_since TEXT,                              -- condition false since (NULL: still true)
    ended_at    TEXT                               -- NULL while the episode is open
);
CREATE UNIQUE INDEX spike_episodes_open ON spike_episodes (topic_id) WHERE ended_at IS NULL;
