-- The client's own request id, kept apart from the server's request_id
-- (which is always the server's, so no caller can reuse another's).
ALTER TABLE audit_events ADD COLUMN correlation_id TEXT;
CREATE INDEX IF NOT EXISTS audit_events_by_correlation_id ON audit_events (correlation_id, id DESC);
