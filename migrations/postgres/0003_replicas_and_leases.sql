-- Which replica wrote a row: a replica resolves rows left pending only
-- when the replica that wrote them is gone (its heartbeat is stale), so a
-- starting pod never marks another's live tunnel `unknown`. Rows written
-- by binaries older than this column have none, and are resolved by age.
ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS served_by TEXT;

-- One row per running replica, its heartbeat renewed every few seconds.
CREATE TABLE IF NOT EXISTS krayne_replicas (
    id      TEXT PRIMARY KEY,
    seen_at TIMESTAMPTZ NOT NULL
);

-- Quota admission, one namespace at a time across replicas: a lease a
-- replica takes for the length of one admission (no connection is held
-- while Kubernetes is called), which expires if its holder dies.
CREATE TABLE IF NOT EXISTS quota_admissions (
    namespace  TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
