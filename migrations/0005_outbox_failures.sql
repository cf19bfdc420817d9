-- Delivery gives up on a message that keeps failing temporarily (5xx, network) for a day while
-- Telegram answers the others: when its rows first failed, kept across restarts. NULL: never
-- failed (or the failures were a general outage's, which count against no message).
ALTER TABLE outbox ADD COLUMN first_failed_at TEXT;
