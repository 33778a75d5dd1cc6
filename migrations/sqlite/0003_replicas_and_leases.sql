-- Which replica wrote a row: a replica resolves rows left pending only
-- when the replica that wrote them is gone (its heartbeat is stale).
ALTER TABLE audit_events ADD COLUMN served_by TEXT;

-- One row per running server, its heartbeat renewed every few seconds.
CREATE TABLE IF NOT EXISTS krayne_replicas (
    id      TEXT PRIMARY KEY,
    seen_at TEXT NOT NULL
);

-- Kept for one schema across backends; with SQLite (one process) quota
-- admission is serialized in the process.
CREATE TABLE IF NOT EXISTS quota_admissions (
    namespace  TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
