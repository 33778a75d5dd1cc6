-- An audit row's outcome is final once it is neither 'pending' nor
-- 'unknown' (see the Postgres migration of the same number).
CREATE TRIGGER IF NOT EXISTS audit_events_final_outcome
    BEFORE UPDATE ON audit_events
    FOR EACH ROW WHEN OLD.outcome NOT IN ('pending', 'unknown') OR (OLD.outcome = 'unknown' AND NEW.outcome = 'pending')
BEGIN
    SELECT RAISE(ABORT, 'audit row is final: it cannot be changed');
END;
