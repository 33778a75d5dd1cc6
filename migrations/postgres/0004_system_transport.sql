-- krayne's own actions (the lifecycle reaper) are recorded with the
-- transport `system`: no request brought them.
ALTER TABLE audit_events DROP CONSTRAINT IF EXISTS audit_events_transport_check;
ALTER TABLE audit_events
    ADD CONSTRAINT audit_events_transport_check CHECK (transport IN ('rest', 'grpc', 'system'));
