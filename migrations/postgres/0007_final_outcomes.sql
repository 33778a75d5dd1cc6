-- An audit row's outcome is final once it is neither 'pending' nor
-- 'unknown' (the sweeper's word for a row whose replica went away, which
-- a late finish may still correct, though never back to 'pending'): no
-- role, the runtime role included, can rewrite what a request's outcome
-- was.
CREATE OR REPLACE FUNCTION audit_events_final_outcome() RETURNS trigger AS $$
BEGIN
    IF OLD.outcome NOT IN ('pending', 'unknown') OR (OLD.outcome = 'unknown' AND NEW.outcome = 'pending') THEN
        RAISE EXCEPTION 'audit row % is final (outcome %): it cannot be changed', OLD.id, OLD.outcome
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS audit_events_final_outcome ON audit_events;
CREATE TRIGGER audit_events_final_outcome
    BEFORE UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_final_outcome();
