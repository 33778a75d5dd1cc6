-- The audit log: one row per audited request. Mutations are written as
-- 'pending' before Kubernetes is called and finished afterwards.
CREATE TABLE IF NOT EXISTS audit_events (
    id              UUID PRIMARY KEY,              -- UUID v7: time-ordered
    occurred_at     TIMESTAMPTZ NOT NULL,
    completed_at    TIMESTAMPTZ,
    request_id      TEXT NOT NULL,
    actor_subject   TEXT NOT NULL,
    actor_email     TEXT,
    actor_groups    JSONB NOT NULL DEFAULT '[]',
    actor_teams     JSONB NOT NULL DEFAULT '[]',
    source_ip       TEXT,
    user_agent      TEXT,
    transport       TEXT NOT NULL CHECK (transport IN ('rest', 'grpc')),
    action          TEXT NOT NULL,
    namespace       TEXT,
    cluster         TEXT,
    request_summary JSONB NOT NULL DEFAULT 'null',
    outcome         TEXT NOT NULL
        CHECK (outcome IN ('pending', 'succeeded', 'failed', 'denied', 'invalid', 'unknown')),
    http_status     INTEGER,
    grpc_code       TEXT,
    error           TEXT,
    duration_ms     BIGINT
);

-- Newest first within each filter the query API offers.
CREATE INDEX IF NOT EXISTS audit_events_by_namespace ON audit_events (namespace, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_actor ON audit_events (actor_subject, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_action ON audit_events (action, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_cluster ON audit_events (cluster, id DESC);
-- For `since`/`until` and the retention job.
CREATE INDEX IF NOT EXISTS audit_events_by_time ON audit_events (occurred_at);
-- For the sweeper, which looks only at unfinished rows.
CREATE INDEX IF NOT EXISTS audit_events_pending ON audit_events (occurred_at) WHERE outcome = 'pending';
