-- When something last used a cluster through krayne (a tunnel, a proxied
-- connection, a browser session, a followed log): what the lifecycle
-- reaper reads to tell whether a cluster is idle. One row per cluster; a
-- later use wins.
CREATE TABLE IF NOT EXISTS cluster_uses (
    namespace TEXT NOT NULL,
    cluster   TEXT NOT NULL,
    used_at   TEXT NOT NULL,
    PRIMARY KEY (namespace, cluster)
);
