-- krayne's own actions (the lifecycle reaper) are recorded with the
-- transport `system`: no request brought them. SQLite cannot change a
-- CHECK constraint in place, so the table is rebuilt, rows and indexes kept.
CREATE TABLE audit_events_new (
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
    transport       TEXT NOT NULL CHECK (transport IN ('rest', 'grpc', 'system')),
    action          TEXT NOT NULL,
    namespace       TEXT,
    cluster         TEXT,
    request_summary TEXT NOT NULL DEFAULT 'null',
    outcome         TEXT NOT NULL
        CHECK (outcome IN ('pending', 'succeeded', 'failed', 'denied', 'invalid', 'unknown')),
    http_status     INTEGER,
    grpc_code       TEXT,
    error           TEXT,
    duration_ms     INTEGER,
    correlation_id  TEXT,
    served_by       TEXT
);

INSERT INTO audit_events_new (
    id, occurred_at, completed_at, request_id, actor_subject, actor_email, actor_groups, actor_teams,
    source_ip, user_agent, transport, action, namespace, cluster, request_summary, outcome,
    http_status, grpc_code, error, duration_ms, correlation_id, served_by
)
SELECT
    id, occurred_at, completed_at, request_id, actor_subject, actor_email, actor_groups, actor_teams,
    source_ip, user_agent, transport, action, namespace, cluster, request_summary, outcome,
    http_status, grpc_code, error, duration_ms, correlation_id, served_by
FROM audit_events;

DROP TABLE audit_events;
ALTER TABLE audit_events_new RENAME TO audit_events;

CREATE INDEX IF NOT EXISTS audit_events_by_namespace ON audit_events (namespace, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_actor ON audit_events (actor_subject, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_action ON audit_events (action, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_cluster ON audit_events (cluster, id DESC);
CREATE INDEX IF NOT EXISTS audit_events_by_time ON audit_events (occurred_at);
CREATE INDEX IF NOT EXISTS audit_events_pending ON audit_events (occurred_at) WHERE outcome = 'pending';
CREATE INDEX IF NOT EXISTS audit_events_by_correlation_id ON audit_events (correlation_id, id DESC);
