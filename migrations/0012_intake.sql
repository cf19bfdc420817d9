-- Issue 22: new papers come from arXiv's OAI-PMH interface, keyed on their announcement.
--
-- papers.announced: when arXiv announced the paper into a category we follow, as far as we know
-- (ISO-8601 UTC). Alerts count their age from it; momentum keeps counting by `published` (the
-- first version's date). Papers stored before this migration were found by submission date:
-- for them the two are taken to be the same.
ALTER TABLE papers ADD COLUMN announced TEXT;
UPDATE papers SET announced = published;

-- One row per configured category set (the sorted categories, as backfill_windows keys them).
--   watermark        the next daily harvest's `from` (a day): the datestamp of the newest
--                    record a complete harvest read (has an expected update appeared?);
--   history_from     every paper created on or after this day is stored (a complete history
--                    harvest from it has finished);
--   pending_from     a history harvest in progress: the day it harvests from,
--   pending_set      the OAI-PMH set it is reading, and
--   pending_token    the resumption token of its next page (NULL: the set's first page).
CREATE TABLE intake (
    categories     TEXT PRIMARY KEY,
    watermark      TEXT,
    history_from   TEXT,
    pending_from   TEXT,
    pending_set    TEXT,
    pending_token  TEXT,
    updated_at     TEXT NOT NULL
);

-- An existing database read the search API: its backfilled days are its history, and its last
-- successful poll (which re-read a week of submissions) is where the first harvest starts.
INSERT INTO intake (categories, watermark, history_from, updated_at)
SELECT categories,
       (SELECT substr(max(started_at), 1, 10) FROM ingest_runs WHERE kind = 'poll' AND ok = 1),
       min(window_start),
       max(completed_at)
FROM backfill_windows
GROUP BY categories;
