-- When something last used a cluster through krayne (a tunnel, a proxied
-- connection, a browser session, a followed log), recorded by every
-- replica: the lifecycle reaper, on whichever replica leads, sees them all
-- (replicas share no memory). One row per cluster; a later use wins.
CREATE TABLE IF NOT EXISTS cluster_uses (
    namespace TEXT NOT NULL,
    cluster   TEXT NOT NULL,
    used_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, cluster)
);
