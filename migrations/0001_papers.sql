-- Papers, their full-text index, and the bookkeeping of ingestion rounds.

-- One row per arXiv paper, keyed by the id WITHOUT version ("2401.01234", "hep-th/9901001").
-- `id` is a stable integer rowid: the FTS index and matching refer to it, and "papers stored
-- after X" is simply "id > X".
CREATE TABLE papers (
    id               INTEGER PRIMARY KEY,
    arxiv_id         TEXT    NOT NULL UNIQUE,
    version          INTEGER NOT NULL CHECK (version >= 1),
    title            TEXT    NOT NULL,
    abstract         TEXT    NOT NULL,
    authors          TEXT    NOT NULL,            -- JSON array of names, arXiv order
    primary_category TEXT    NOT NULL,
    categories       TEXT    NOT NULL,            -- space-separated, primary first
    published        TEXT    NOT NULL,            -- first version, ISO-8601 UTC "YYYY-MM-DDTHH:MM:SSZ"
    updated          TEXT    NOT NULL,            -- latest version, same format
    comment          TEXT,
    journal_ref      TEXT,
    doi              TEXT,
    stored_at        TEXT    NOT NULL             -- when topicpulse first stored it
);
CREATE INDEX papers_published ON papers (published);

-- Full-text index over the searchable columns, kept in step with `papers` by triggers.
CREATE VIRTUAL TABLE papers_fts USING fts5(
    title, abstract, authors, categories,
    content = 'papers', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER papers_fts_insert AFTER INSERT ON papers BEGIN
    INSERT INTO papers_fts (rowid, title, abstract, authors, categories)
    VALUES (new.id, new.title, new.abstract, new.authors, new.categories);
END;

CREATE TRIGGER papers_fts_delete AFTER DELETE ON papers BEGIN
    INSERT INTO papers_fts (papers_fts, rowid, title, abstract, authors, categories)
    VALUES ('delete', old.id, old.title, old.abstract, old.authors, old.categories);
END;

CREATE TRIGGER papers_fts_update AFTER UPDATE OF title, abstract, authors, categories ON papers
BEGIN
    INSERT INTO papers_fts (papers_fts, rowid, title, abstract, authors, categories)
    VALUES ('delete', old.id, old.title, old.abstract, old.authors, old.categories);
    INSERT INTO papers_fts (rowid, title, abstract, authors, categories)
    VALUES (new.id, new.title, new.abstract, new.authors, new.categories);
END;

-- One row per ingestion round (poll, backfill window, file import).
CREATE TABLE ingest_runs (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('poll', 'backfill', 'import')),
    started_at  TEXT    NOT NULL,
    finished_at TEXT,
    requests    INTEGER NOT NULL DEFAULT 0,
    new         INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    errors      INTEGER NOT NULL DEFAULT 0,
    duration_s  REAL,
    ok          INTEGER,                          -- 1 success, 0 failed, NULL still running
    message     TEXT
);
CREATE INDEX ingest_runs_kind ON ingest_runs (kind, id);

-- Backfill progress: a date window is recorded once all of its papers are stored, so an
-- interrupted backfill resumes with the first window not listed here.
CREATE TABLE backfill_windows (
    categories   TEXT NOT NULL,                   -- the sorted category set the window was fetched for
    window_start TEXT NOT NULL,                   -- YYYY-MM-DD, inclusive
    window_end   TEXT NOT NULL,                   -- YYYY-MM-DD, inclusive
    papers       INTEGER NOT NULL,
    completed_at TEXT NOT NULL,
    PRIMARY KEY (categories, window_start)
);
