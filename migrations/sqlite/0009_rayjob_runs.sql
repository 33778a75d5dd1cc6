-- What krayne kept of each RayJob's job once it ended (issue 60): Ray's
-- status, the exit code and the last MiB of the driver's log, so that
-- `krayne rayjob logs` still answers after KubeRay has deleted the job's
-- cluster. One row per RayJob (its uid), written once by the replica that
-- leads; times are RFC 3339 text.
CREATE TABLE IF NOT EXISTS rayjob_runs (
    uid       TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    job_id    TEXT NOT NULL,
    status    TEXT NOT NULL,
    exit_code BIGINT,
    log_tail  TEXT,
    truncated BOOLEAN NOT NULL DEFAULT FALSE,
    kept_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS rayjob_runs_name ON rayjob_runs (namespace, name);
