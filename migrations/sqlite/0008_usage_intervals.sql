-- Usage accounting: every Ray pod's running life and every cluster's
-- existence and suspensions, as intervals the one leader records. A key
-- (kind and the object's uid) is recorded once, so a restart, a leader
-- change or a retried write never counts anything twice. Times are
-- milliseconds since the Unix epoch (UTC) in both databases.
CREATE TABLE IF NOT EXISTS usage_intervals (
    key          TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    cluster      TEXT NOT NULL,
    worker_group TEXT,
    creator      TEXT,
    teams        TEXT NOT NULL,
    cpu_millis   BIGINT NOT NULL,
    memory_bytes BIGINT NOT NULL,
    gpus         BIGINT NOT NULL,
    gpu_resource TEXT,
    started_ms   BIGINT NOT NULL,
    ended_ms     BIGINT,
    estimated    BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS usage_intervals_open ON usage_intervals (key) WHERE ended_ms IS NULL;
CREATE INDEX IF NOT EXISTS usage_intervals_namespace ON usage_intervals (namespace, started_ms);
CREATE INDEX IF NOT EXISTS usage_intervals_started ON usage_intervals (started_ms);

-- When the recorder last saw every pod: where an interval that ended while
-- no replica watched is closed (and marked estimated).
CREATE TABLE IF NOT EXISTS usage_recorder (
    id      INTEGER PRIMARY KEY,
    seen_ms BIGINT NOT NULL
);
