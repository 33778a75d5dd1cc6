-- Each namespace's lifecycle policy as the reaper last saw it in force
-- (JSON), the one before it, and since when (a fixed-width UTC stamp): a
-- new or changed policy only reports, for the settle time, what it alone
-- would suspend or delete. Written by whichever replica leads.
CREATE TABLE IF NOT EXISTS lifecycle_policies (
    namespace TEXT NOT NULL PRIMARY KEY,
    policy    TEXT NOT NULL,
    previous  TEXT,
    since     TEXT NOT NULL
);
