-- The audit log (SQLite): as migrations/postgres, with TEXT for UUIDs,
-- timestamps (RFC 3339, UTC, fixed width, so they sort) and JSON.
CREATE TABLE IF NOT EXISTS audit_events (
    id              TEXT PRIMARY KEY,
    occurred_at     TEXT NOT NULL,
    completed_at    TEXT,
    request_id      TEXT NOT NULL,
    actor_subject   TEXT NOT NULL,
    actor_email     TEXT,
    actor_groups    TEXT NOT NULL DEFAULT '[]',
    actor_teams     TEXT NOT NULL DEFAULT '[]',
    source_ip       TEXT,
    user_agent      TEXT,
    transport       TEXT NOT NULL CHECK (transport IN ('rest', 'grpc')),
    action          TEXT NOT NULL,
    namespace       TEXT,
    cluster         TEXT,
    request_summary TEXT NOT NULL DEFAULT 'null',
    outcome         TEXT NOT NULL
        CHECK (outcome IN ('pending', 'succeeded', 'failed', 'denied', 'invalid', 'unknown')),
    http_status     INTEGER,
    grpc_code       TEXT,
    error           TEXT,
    duration_ms     INTEGER
);

CREATE INDEX IF NOT EXISTS audit_events_by_namespace ON audit_events (namespace, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_actor ON audit_events (actor_subject, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_action ON audit_events (action, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_cluster ON audit_events (cluster, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_time ON audit_events (occurred_at);
CREATE INDEX IF NOT EXISTS audit_events_pending ON audit_events (occurred_at) WHERE outcome = 'pending';
