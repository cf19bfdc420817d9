-- The engine's own progress: the newest paper whose alerts have been queued ("fanned out").
-- A round queues alerts only for papers after it, so a topic that fell behind (its only chat
-- came back) catches up without sending anyone older papers. Catalogue topics are matched
-- every round, so where they stand is where the engine stood.
CREATE TABLE engine_state (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO engine_state (key, value)
SELECT 'fanned_out_through', coalesce(max(matched_through), 0)
FROM topics WHERE kind = 'catalogue' AND active = 1;
