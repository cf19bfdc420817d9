-- Queries a web page offered to follow. The page's Telegram deep link carries a short code
-- (a /start payload holds at most 64 characters, a query up to 300); /start q_<code> reads the
-- query back here and asks for a tap before following anything.
CREATE TABLE shared_queries (
    code TEXT PRIMARY KEY,
    query TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
