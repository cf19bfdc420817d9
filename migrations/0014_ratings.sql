-- Each chat's 👍 / 👎 on papers, and the taste learned from them (issue 24).
--
-- One rating per chat and paper: ``item`` is the arXiv id (without version) or, for an
-- imported reference that is not an arXiv paper, "text:" and a digest of its title. A paper
-- the store holds is linked by ``paper_id``; an imported entry the store lacks keeps its own
-- title and abstract, which the taste learns from.
CREATE TABLE ratings (
    chat_id  INTEGER NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    item     TEXT    NOT NULL,
    paper_id INTEGER REFERENCES papers (id) ON DELETE SET NULL,
    value    INTEGER NOT NULL CHECK (value IN (-1, 1)),
    source   TEXT    NOT NULL CHECK (source IN ('button', 'import')),
    title    TEXT,
    abstract TEXT,
    rated_by INTEGER,           -- the user who tapped (in a group every member's tap counts)
    rated_at TEXT    NOT NULL,
    PRIMARY KEY (chat_id, item)
) WITHOUT ROWID;
CREATE INDEX ratings_by_paper ON ratings (chat_id, paper_id);

-- A chat's taste: its settings, and the model trained from its ratings. ``changed`` counts the
-- rating changes, ``trained`` the count the model was trained at: a model is due while
-- changed > trained (also after a restart). A chat that never rated has no row.
CREATE TABLE tastes (
    chat_id    INTEGER PRIMARY KEY REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    hold_back  INTEGER NOT NULL DEFAULT 1,   -- /taste off: 0
    changed    INTEGER NOT NULL DEFAULT 0,
    trained    INTEGER NOT NULL DEFAULT 0,
    model      TEXT,                         -- JSON (insight.taste.Taste), NULL before training
    trained_at TEXT
);
CREATE INDEX tastes_due ON tastes (chat_id) WHERE changed > trained;

-- Papers an instant alert held back as probably not for the chat: never dropped, they wait
-- here until the chat asks for them ("show") — the outbox row is settled in the same
-- transaction that puts the paper here.
CREATE TABLE held_back (
    chat_id  INTEGER NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE ON UPDATE CASCADE,
    paper_id INTEGER NOT NULL REFERENCES papers (id) ON DELETE CASCADE,
    score    REAL    NOT NULL,
    held_at  TEXT    NOT NULL,
    shown_at TEXT,
    PRIMARY KEY (chat_id, paper_id)
) WITHOUT ROWID;
CREATE INDEX held_back_waiting ON held_back (chat_id) WHERE shown_at IS NULL;
